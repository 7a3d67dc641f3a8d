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
  // Opening "Edit" puts the cursor in the text.
  for (const details of document.querySelectorAll("details.edit")) {
    details.addEventListener("toggle", () => {
      const area = details.querySelector("textarea");
      if (details.open && area) area.focus();
    });
  }
});
