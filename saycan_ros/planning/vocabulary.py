"""What the planner talks about: the kitchen, the skill repertoire and the dialogue prompt,
loaded together so that the prompt is always checked against the skills."""
from __future__ import annotations

from dataclasses import dataclass

from saycan_ros.core.kitchen import Kitchen, load_kitchen
from saycan_ros.core.skills import SkillSet, load_skills
from saycan_ros.planning.prompt import DialoguePrompt, load_prompt


@dataclass(frozen=True)
class Vocabulary:
    kitchen: Kitchen
    skills: SkillSet
    prompt: DialoguePrompt


def load_vocabulary(kitchen_file=None, skills_file=None, prompt_file=None) -> Vocabulary:
    """Kitchen, skills and prompt, with the prompt checked against the skills."""
    kitchen = load_kitchen(kitchen_file or None)
    skills = load_skills(kitchen, skills_file or None)
    prompt = load_prompt(prompt_file or None)
    prompt.check_against(skills)
    return Vocabulary(kitchen, skills, prompt)
