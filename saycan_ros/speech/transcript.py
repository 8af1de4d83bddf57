"""A recogniser's transcript -> the instruction text the planner takes."""
from __future__ import annotations

import re

#: What recognisers write for silence or noise instead of words.
_NON_SPEECH = re.compile(r"\[[^\]]*\]|\([^)]*\)|<[^>]*>")


def to_instruction(transcript: str) -> str:
    """One sentence in the planner's style: noise tags removed, spaces collapsed, lower case
    (the kitchen's names are lower case: "Coke Can" -> "coke can"), the first letter capital and
    a full stop unless it is a question. "" when nothing was said."""
    text = _NON_SPEECH.sub(" ", transcript or "")
    text = " ".join(text.split()).strip(" .,!;:-")
    if not text:
        return ""
    text = re.sub(r"\bi\b", "I", text.lower())
    text = text[0].upper() + text[1:]
    return text if text.endswith("?") else text + "."
