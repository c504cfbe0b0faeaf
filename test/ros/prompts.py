"""Prompts the node tests share, with the facts about them the tests rely on.

``LEGAL_PROMPT`` and ``CODE_PROMPT``: the target's greedy continuation runs ``LONG_TOKENS``
tokens without an end-of-sequence (``test_generate.py::test_long_prompts_do_not_end_early``
checks it), so a goal for them is still running when a test cancels, deactivates, interrupts
or queues behind it.
"""

ROBOT_PROMPT = "USER: Could you go to the kitchen and bring me a cup\nROBOT:"
CODE_PROMPT = "def parse_header(line):\n    \"\"\"Split a header line into name and value.\"\"\"\n"
MATH_PROMPT = "Problem: Compute the derivative of 3*x**2 + 5*x with respect to x.\nSolution:"
LEGAL_PROMPT = "Permission is hereby granted, free of charge, to any person obtaining a copy"
LONG_TOKENS = 500
