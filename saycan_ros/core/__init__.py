"""The bottom of the house: what every other part may import and that imports none of them
(paths now; the kitchen, skills, task files, goals and the symbolic world as the layout of
docs/architecture.md lands)."""
