"""The README says what exists: every `saycan` subcommand it shows is one, and every file it
links to is there."""
import re
from pathlib import Path

from saycan_ros.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _subcommands(parser) -> dict:
    """{verb: {sub-verb, ...}} of the saycan command."""
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    out = {}
    for verb, sub in action.choices.items():
        nested = [a for a in sub._actions if a.__class__.__name__ == "_SubParsersAction"]
        out[verb] = set(nested[0].choices) if nested else set()
    return out


def test_every_saycan_subcommand_in_the_readme_exists():
    known = _subcommands(build_parser())
    code = re.findall(r"```[a-z]*\n(.*?)```", README, re.S) + re.findall(r"`([^`\n]+)`", README)
    used = [m for block in code for m in
            re.findall(r"^\s*saycan ([a-z][a-z_-]*)(?: ([a-z][a-z_-]*))?", block, re.M)]
    assert used, "the README shows no saycan command"
    for verb, sub in used:
        assert verb in known, f"`saycan {verb}` in the README is not a subcommand"
        if known[verb] and sub and not sub.startswith("-"):
            assert sub in known[verb], f"`saycan {verb} {sub}` in the README is not a subcommand"


def test_every_file_the_readme_links_to_exists():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    assert local
    missing = [link for link in local if not (ROOT / link).exists()]
    assert not missing, missing


def test_models_holds_only_what_the_product_loads_each_with_its_card():
    """Every entry of models/ is named by the package's code outside training and the CLI (a
    node, the planner, the pick skill loads it) and has a card in models/README.md (a record
    ``x.json`` goes with the card of ``x.pt``)."""
    cards = (ROOT / "models" / "README.md").read_text(encoding="utf-8")
    code = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "saycan_ros").rglob("*.py")
                     if "learning" not in p.parts and p.parent.name != "cli")
    entries = [p for p in (ROOT / "models").iterdir() if p.name != "README.md"]
    assert entries
    for entry in entries:
        stem = entry.name.split(".")[0]
        assert re.search(rf"^## {re.escape(stem)}\b", cards, re.M), \
            f"models/{entry.name} has no card in models/README.md"
        assert stem in code, f"models/{entry.name} is loaded by nothing in the product"
