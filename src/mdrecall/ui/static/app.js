// mdrecall inspector: small conveniences only; every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // "/" focuses the page's search box, as on most sites.
  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (event.key !== "/" || (target instanceof HTMLElement && target.closest("input, textarea, select"))) return;
    const box = document.querySelector("input[type=search]");
    if (box) { event.preventDefault(); box.focus(); box.select(); }
  });
  // Filters apply as soon as a choice changes.
  for (const select of document.querySelectorAll("form.filters select")) {
    select.addEventListener("change", () => select.form && select.form.requestSubmit());
  }
  // Choosing another mode re-runs the query in it.
  for (const radio of document.querySelectorAll("form.search input[name=mode]")) {
    radio.addEventListener("change", () => {
      const box = radio.form && radio.form.querySelector("input[name=q]");
      if (box && box.value.trim()) radio.form.requestSubmit();
    });
  }
  // Opening "Edit" puts the cursor in the text.
  for (const details of document.querySelectorAll("details.edit")) {
    details.addEventListener("toggle", () => {
      const area = details.querySelector("textarea");
      if (details.open && area) area.focus();
    });
  }
});
