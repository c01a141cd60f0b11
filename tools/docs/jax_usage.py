"""How much of real JAX usage funcgrad covers, from the usage survey's list of missing names.

`jax_usage.json` holds, for every JAX/optax name funcgrad lacked at 9e84c9b, how many of 84
public JAX-using repositories use it (recorded once from `shared/notes/jax-usage.md`'s "Full
missing lists" by `record()`; the survey's method is described there). At that commit funcgrad
had the names behind 84% of all uses (`BEFORE_SHARE`, a use being one repository using one
name), so the missing names carried 16%. Looking the same names up in funcgrad today gives
the share now:

    >>> summary()["share"]          # the usage-weighted share of names funcgrad has
    >>> still_missing(min_repos=2)  # [(full name, repos)] still missing, most used first

`docs/for-jax-users.md` shows both (`<!-- jax-usage -->`), and `tests/test_jax_names.py`
holds every name used by two or more repositories to "present, or missing with a reason in
`jax_differences.MISSING`".
"""

import json
import os
import re
import sys

import jax_differences
import jax_table

HERE = os.path.dirname(os.path.abspath(__file__))
BEFORE_SHARE = 0.84  # the survey's share of uses funcgrad had at 9e84c9b
BEFORE_NAMES = (693, 1092)  # names funcgrad had / names used at least once, then

_SECTION = re.compile(r"^- \*\*([\w.&;<>]+)\*\* \((?:\d+|[^)]*)\): (.*)$")
_ENTRY = re.compile(r"^([\w.]+)(?: \((\d+)\))?$")


def record(notes_path, path=None):
    """Write `jax_usage.json` ({namespace: {name: repos}}) from the survey's notes."""
    used = {}
    with open(notes_path) as f:
        lines = f.read().split("## Full missing lists", 1)[1].splitlines()
    for line in lines:
        m = _SECTION.match(line.strip())
        if not m:
            continue
        namespace = m.group(1)
        if namespace == "jax.scipy.stats.&lt;dist&gt;":  # whole distributions, no counts
            namespace = "jax.scipy.stats"
        entries = used.setdefault(namespace, {})
        for item in m.group(2).split(", "):
            e = _ENTRY.match(item.strip())
            if e:
                entries[e.group(1)] = int(e.group(2) or 0)
    with open(path or os.path.join(HERE, "jax_usage.json"), "w") as f:
        json.dump(used, f, indent=1, sort_keys=True)
        f.write("\n")
    return used


def load(path=None):
    with open(path or os.path.join(HERE, "jax_usage.json")) as f:
        return json.load(f)


def missing_now(used=None):
    """[(full name, repos)] of the surveyed names funcgrad still lacks, most used first."""
    used = used or load()
    out = [(f"{ns}.{name}", repos) for ns, names in used.items() for name, repos in names.items()
           if jax_table.status(ns, name) is None]
    return sorted(out, key=lambda e: (-e[1], e[0]))


def still_missing(min_repos=2, used=None):
    return [(name, repos) for name, repos in missing_now(used) if repos >= min_repos]


def summary(used=None):
    """The survey's numbers then and now: shares of uses and counts of used names."""
    used = used or load()
    counts = [repos for names in used.values() for repos in names.values()]
    before_uses = sum(counts)
    missing = missing_now(used)
    now_uses = sum(r for _, r in missing)
    now_used_names = sum(1 for _, r in missing if r)
    have, total = BEFORE_NAMES
    return {"share_before": BEFORE_SHARE,
            "share": 1 - (1 - BEFORE_SHARE) * now_uses / before_uses,
            "names_before": have, "names_used": total,
            "names_now": total - now_used_names,
            "missing_names_before": sum(len(n) for n in used.values()),
            "missing_names_now": len(missing)}


def usage_markdown(used=None):
    """The "For JAX users" paragraph and table: the share of real usage, what is still missing."""
    s = summary(used)
    rows = still_missing(2, used)
    out = [f"Counting every use of a JAX or optax name in 84 public JAX repositories (flax, "
           f"haiku, equinox, numpyro, brax, maxtext, ...), funcgrad has the names behind "
           f"**{s['share']:.1%}** of the uses (at the start of this work: "
           f"{s['share_before']:.0%}); {s['names_now']} of the {s['names_used']} names used at "
           f"least once (then: {s['names_before']}). The names used by two or more of those "
           f"repositories that funcgrad still lacks ({len(rows)}):", "",
           "| name | repositories | why missing |", "| --- | ---: | --- |"]
    out += [f"| `{name}` | {repos} | {jax_differences.MISSING.get(name, 'not yet')} |"
            for name, repos in rows]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--record":
        record(sys.argv[2])
    print(json.dumps(summary(), indent=1))
    for name, repos in still_missing(2):
        print(f"{repos:4d}  {name}")
