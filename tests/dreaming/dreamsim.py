"""A simulated month of agent usage over a generated workspace (synthetic notes, nothing copied).

``build_plan(seed)`` invents 30 daily notes full of facts about invented people, services, clients and
trips (names are generated syllable strings, so queries about one fact rarely hit another by accident),
and a search schedule:

* recurring facts: recalled on 3-6 distinct days by 3-5 distinct phrasings;
* near misses: twice (2 days, 2 phrasings); three phrasings on one day; one phrasing on three days;
* one-offs: recalled once.

``run_month(workspace, plan, config)`` writes each day's note in the morning, runs that day's searches
through the real ``open_manager(...).search`` (so recall recording goes through the real listener) and
runs ``run_dream`` every night. It returns the per-night evaluations so the calibration can look at the
score distributions.

Run ``python tests/dreaming/dreamsim.py`` for the calibration figures (``--provider local`` for the
MiniLM hybrid search instead of keyword-only).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

START = date(2026, 3, 1)
DAYS = 30

_ONSETS = "b c d f g k l m n p r s t v z br kr tr st gr pl sk".split()
_VOWELS = "a e i o u ai ei ou".split()
_CODAS = "n r l s k x m th nd rk".split()


def _word(rng: random.Random, used: set[str], syllables: int = 2) -> str:
    while True:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)) + rng.choice(_CODAS)
        if w not in used and len(w) >= 5:
            used.add(w)
            return w


@dataclass
class Fact:
    fid: str
    day: int  # index of the note it lives in (0-based)
    section: str
    text: str
    queries: list[str]


@dataclass
class Search:
    day: int
    minute: int
    query: str
    target: str | None  # fact id the query is about


@dataclass
class Plan:
    facts: dict[str, Fact]
    notes: dict[int, str]  # day index -> note text
    searches: list[Search]
    kinds: dict[str, str] = field(default_factory=dict)  # fact id -> recurring / twice / sameday / samequery / once / idle


def _make_fact(rng: random.Random, used: set[str], fid: str, day: int) -> Fact:
    cap = lambda s: s.capitalize()  # noqa: E731
    kind = rng.randrange(7)
    if kind == 0:
        svc, host, port = _word(rng, used), _word(rng, used) + f"-{rng.randint(1, 9)}", rng.randint(2000, 9999)
        return Fact(fid, day, "Infra", f"The {svc} service runs on host {host}, port {port}.",
                    [f"{svc} service host", f"which port does {svc} listen on", f"{host} machine",
                     f"where is {svc} deployed", f"{svc} port number"])
    if kind == 1:
        person, drink, food = cap(_word(rng, used)), _word(rng, used), _word(rng, used)
        return Fact(fid, day, "People", f"{person} prefers {drink} tea and cannot stand {food} pastries.",
                    [f"{person} drink preference", f"what tea does {person} like", f"{person} food dislikes",
                     f"{person} preferences", f"does {person} eat {food}"])
    if kind == 2:
        client, thing = cap(_word(rng, used)), _word(rng, used)
        due = START + timedelta(days=rng.randint(30, 90))
        return Fact(fid, day, "Clients", f"{client} expects the {thing} report by {due:%B %d}.",
                    [f"{client} deadline", f"when is the {thing} report due", f"{client} {thing} report",
                     f"{client} expectations", f"due date for {client}"])
    if kind == 3:
        city, code = cap(_word(rng, used)), f"{rng.choice('ABCDEFGHJK')}{rng.choice('LMNPRSTVWXZ')}{rng.randint(100, 999)}"
        return Fact(fid, day, "Travel", f"Flight {code} to {city} leaves Thursday at {rng.randint(6, 21)}:{rng.choice(['05', '20', '45'])}.",
                    [f"flight to {city}", f"{code} departure time", f"when do I fly to {city}",
                     f"{city} trip", f"{code} flight"])
    if kind == 4:
        tool, purpose, alt = cap(_word(rng, used)), _word(rng, used), cap(_word(rng, used))
        return Fact(fid, day, "Decisions", f"We chose {tool} for {purpose} tracking instead of {alt}.",
                    [f"{purpose} tracking tool", f"why not {alt}", f"tool chosen for {purpose}",
                     f"{tool} decision", f"{tool} versus {alt}"])
    if kind == 5:
        person = cap(_word(rng, used))
        return Fact(fid, day, "Contacts", f"{person} can be reached at {person.lower()}@{_word(rng, used)}.example, extension {rng.randint(100, 999)}.",
                    [f"{person} email", f"how to contact {person}", f"{person} extension",
                     f"{person} contact details", f"reach {person}"])
    project = cap(_word(rng, used))
    return Fact(fid, day, "Budget", f"The {project} budget is {rng.randint(5, 95)}k EUR for this quarter.",
                [f"{project} budget", f"how much money does {project} have", f"{project} spending limit",
                 f"{project} quarterly funds", f"{project} cost ceiling"])


def build_plan(seed: int = 7, facts_per_day: int = 7) -> Plan:
    rng = random.Random(seed)
    used: set[str] = set()
    facts: dict[str, Fact] = {}
    notes: dict[int, str] = {}
    for day in range(DAYS):
        day_facts = [_make_fact(rng, used, f"d{day:02d}f{i}", day) for i in range(facts_per_day)]
        for f in day_facts:
            facts[f.fid] = f
        lines = [f"# {START + timedelta(days=day):%Y-%m-%d}", "", "Standup at 9:30, nothing unusual.", ""]
        for section in sorted({f.section for f in day_facts}):
            lines += [f"## {section}", ""]
            lines += [f"- {f.text}" for f in day_facts if f.section == section]
            lines.append("")
        notes[day] = "\n".join(lines)

    ids = sorted(facts)
    rng.shuffle(ids)
    early = [i for i in ids if facts[i].day <= 20]
    kinds: dict[str, str] = {}
    searches: list[Search] = []

    def take(pool: list[str], n: int) -> list[str]:
        chosen = [i for i in pool if i not in kinds][:n]
        return chosen

    def schedule(fid: str, days: list[int], queries: list[str]) -> None:
        for d, q in zip(days, queries):
            searches.append(Search(d, rng.randint(0, 600), q, fid))

    for fid in take(early, 14):
        kinds[fid] = "recurring"
        f = facts[fid]
        n_days = rng.randint(3, 6)
        n_queries = rng.randint(3, min(5, n_days))
        window = list(range(f.day, min(DAYS, f.day + rng.randint(n_days, 10))))
        if len(window) < n_days:
            window = list(range(f.day, min(DAYS, f.day + n_days)))
        days = sorted(rng.sample(window, n_days))
        queries = f.queries[:n_queries] + [rng.choice(f.queries[:n_queries]) for _ in range(n_days - n_queries)]
        schedule(fid, days, queries)
    for fid in take(ids, 8):
        kinds[fid] = "twice"
        f = facts[fid]
        d1 = rng.randint(f.day, DAYS - 1)
        d2 = rng.randint(d1, DAYS - 1) if d1 < DAYS - 1 else d1
        schedule(fid, [d1, d2 if d2 != d1 else min(DAYS - 1, d1 + 1)], f.queries[:2])
    for fid in take(ids, 4):
        kinds[fid] = "sameday"
        f = facts[fid]
        d = rng.randint(f.day, DAYS - 1)
        schedule(fid, [d, d, d], f.queries[:3])
    for fid in take([i for i in ids if facts[i].day <= 24], 4):
        kinds[fid] = "samequery"
        f = facts[fid]
        days = sorted(rng.sample(range(f.day, DAYS), 3))
        schedule(fid, days, [f.queries[0]] * 3)
    for fid in take(ids, 45):
        kinds[fid] = "once"
        f = facts[fid]
        schedule(fid, [rng.randint(f.day, DAYS - 1)], [rng.choice(f.queries)])
    for fid in ids:
        kinds.setdefault(fid, "idle")
    searches.sort(key=lambda s: (s.day, s.minute, s.query))
    return Plan(facts, notes, searches, kinds)


@dataclass
class Night:
    day: int
    evaluations: list[Any]  # scoring.Evaluation before that night's promotion
    report: Any  # sweep.DreamReport


def run_month(
    workspace: Path, plan: Plan, config: dict[str, Any], after_night: Callable[[Path, datetime], None] | None = None
) -> list[Night]:
    """Drive the month through the real manager; returns each night's pre-promotion evaluations.

    ``after_night(workspace, night)`` runs after each night's dream (a simulated reviewer).
    """
    from mdrecall import open_manager
    from mdrecall.dreaming import dreaming_config, rank, run_dream
    from mdrecall.dreaming.store import RecallStore

    (workspace / "memory").mkdir(parents=True, exist_ok=True)
    nights: list[Night] = []
    cfg = dreaming_config(config.get("dreaming", {}))
    with open_manager(workspace, config) as manager:
        for day in range(DAYS):
            today = START + timedelta(days=day)
            (workspace / "memory" / f"{today:%Y-%m-%d}.md").write_text(plan.notes[day], encoding="utf-8")
            manager.sync()
            morning = datetime(today.year, today.month, today.day, 8, tzinfo=UTC)
            for s in (s for s in plan.searches if s.day == day):
                manager.search(s.query, now=morning + timedelta(minutes=s.minute))
            night = datetime(today.year, today.month, today.day, 23, tzinfo=UTC)
            manager.flush()  # recall tracking writes in the background
            state = RecallStore(workspace, cfg).load()
            evaluations = rank(state.entries.values(), night, cfg, include_failing=True)
            report = run_dream(workspace, manager.config, night)
            nights.append(Night(day, evaluations, report))
            if after_night is not None:
                after_night(workspace, night)
    return nights


def _percentiles(values: list[float]) -> str:
    if not values:
        return "n=0"
    v = sorted(values)

    def pct(p: float) -> float:
        return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]

    return f"n={len(v)} min={v[0]:.3f} p10={pct(0.1):.3f} median={pct(0.5):.3f} p90={pct(0.9):.3f} max={v[-1]:.3f}"


def calibration_figures(nights: list[Night], cfg: Any) -> dict[str, list[float]]:
    """Scores by class: at the first night an entry met the >=3 days & >=3 queries bar, etc."""
    first_qualified: dict[str, float] = {}
    count_gate: dict[str, float] = {}
    once: dict[str, float] = {}
    twice: dict[str, float] = {}
    relevance: list[float] = []
    for night in nights:
        for ev in night.evaluations:
            e = ev.entry
            if e.promoted_at:
                continue
            if len(e.recall_days) >= 3 and e.unique_queries >= 3:
                first_qualified.setdefault(e.key, ev.score)
            elif (e.signal_count >= cfg.minRecallCount and e.unique_queries >= cfg.minUniqueQueries
                  and len(e.recall_days) >= cfg.minRecallDays):
                count_gate.setdefault(e.key, ev.score)
            if e.signal_count == 1 and ev.age_days < 1:
                once.setdefault(e.key, ev.score)
            if e.signal_count == 2 and ev.age_days < 1:
                twice.setdefault(e.key, ev.score)
    raw: list[float] = []
    for ev in nights[-1].evaluations:
        relevance.append(ev.components.relevance)
        raw.append(ev.entry.total_score / max(1, ev.entry.signal_count))
    return {
        "recurring (>=3 days, >=3 queries) at first qualifying night": list(first_qualified.values()),
        "other entries passing the count gates, first night": list(count_gate.values()),
        "one-offs on the night of their recall": list(once.values()),
        "recalled twice, on the night of the second recall": list(twice.values()),
        "relative relevance of all entries (last night)": relevance,
        "raw search score of all entries, mean per entry (last night)": raw,
    }


if __name__ == "__main__":  # calibration figures for docs/dreaming.md
    import argparse
    import tempfile

    parser = argparse.ArgumentParser()
    parser.add_argument("--provider", default="none")
    parser.add_argument("--seeds", type=int, nargs="*", default=[7, 11, 23])
    args = parser.parse_args()
    from mdrecall.dreaming import dreaming_config

    totals: dict[str, list[float]] = {}
    for seed in args.seeds:
        plan = build_plan(seed)
        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp) / "ws"
            config = {
                "provider": args.provider,
                "store": {"path": str(Path(tmp) / "index.sqlite")},
                # minScore 0 so the figures show the whole distribution.
                "dreaming": {"timezone": "UTC", "autoApply": True, "minScore": 0.0},
            }
            nights = run_month(ws, plan, config)
            for name, values in calibration_figures(nights, dreaming_config(config["dreaming"])).items():
                totals.setdefault(name, []).extend(values)
    print(f"provider={args.provider} seeds={args.seeds}")
    for name, values in totals.items():
        print(f"{name}: {_percentiles(values)}")
