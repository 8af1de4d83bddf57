"""What the planner talks about: the kitchen, the skill repertoire and the dialogue prompt,
loaded together so that the prompt is always checked against the skills."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from saycan_ros.core.config import resolve_config
from saycan_ros.core.kitchen import Kitchen, load_kitchen
from saycan_ros.core.skills import SkillSet, load_skills
from saycan_ros.planning.prompt import DialoguePrompt, load_prompt


@dataclass(frozen=True)
class Vocabulary:
    kitchen: Kitchen
    skills: SkillSet
    prompt: DialoguePrompt


def load_vocabulary(kitchen_file=None, skills_file=None, prompt_file=None) -> Vocabulary:
    """Kitchen, skills and prompt, with the prompt checked against the skills.

    The built-in kitchen's prompt must fit its skills exactly (a typo is an error). With a
    kitchen of the user's (``kitchen_file``) the few-shot examples that name what it lacks are
    left out, said once in the log; a prompt left with nothing is one line naming its file."""
    kitchen = load_kitchen(kitchen_file or None)
    skills = load_skills(kitchen, skills_file or None)
    prompt = load_prompt(prompt_file or None)
    if not kitchen_file:
        prompt.check_against(skills)
        return Vocabulary(kitchen, skills, prompt)
    source = str(resolve_config(prompt_file or None, "prompt.yaml"))
    prompt, dropped = prompt.fitted_to(skills, source)
    if dropped:
        logging.getLogger("saycan_ros").info(
            "%s: %d of its few-shot examples name what %s lacks and are left out (first: %r)",
            source, len(dropped), kitchen.source, dropped[0])
    return Vocabulary(kitchen, skills, prompt)
