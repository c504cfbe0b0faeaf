"""Robot corpus: a procedural USER/ROBOT dialogue grammar (one dialogue = one document).

A ROS robot assistant is the project's home domain; no offline corpus exists, so we generate
one. The grammar mixes natural-language requests, confirmations with structured command
lines (``[cmd] ...``), status reports and clarifications, so the text is highly regular
(easy for a draft) but distinct from every other domain.
"""
from __future__ import annotations

import random

PLACES = ["kitchen", "lab", "charging dock", "hallway", "office", "warehouse bay 3",
          "loading area", "reception", "meeting room", "workshop", "storage room", "garage"]
OBJECTS = ["red cup", "blue box", "screwdriver", "water bottle", "toolbox", "package",
           "laptop", "coffee mug", "sensor kit", "battery pack", "green ball", "clipboard"]
DIRECTIONS = ["forward", "backward", "left", "right"]
ARMS = ["left arm", "right arm", "gripper"]
POLITE = ["", "please ", "could you ", "can you ", "I need you to ", "go ahead and "]
ACKS = ["Okay.", "Understood.", "Sure.", "Copy that.", "On it.", "Roger."]
DONE = ["Done.", "Task complete.", "Finished.", "I have completed the task."]


def _move(rng: random.Random) -> tuple[str, str]:
    d = rng.choice(DIRECTIONS)
    dist = round(rng.uniform(0.2, 5.0), 1)
    speed = round(rng.uniform(0.1, 1.0), 1)
    user = f"{rng.choice(POLITE)}move {d} {dist} meters"
    lin = {"forward": dist, "backward": -dist}.get(d, 0.0)
    ang = {"left": 1.57, "right": -1.57}.get(d, 0.0)
    robot = (f"{rng.choice(ACKS)} Moving {d} {dist} m at {speed} m/s.\n"
             f"[cmd] cmd_vel linear.x={lin} angular.z={ang} speed={speed}")
    return user, robot


def _go(rng: random.Random) -> tuple[str, str]:
    place = rng.choice(PLACES)
    x, y = round(rng.uniform(-20, 20), 2), round(rng.uniform(-20, 20), 2)
    user = f"{rng.choice(POLITE)}go to the {place}"
    robot = (f"{rng.choice(ACKS)} Navigating to the {place}.\n"
             f"[cmd] navigate_to goal=\"{place}\" x={x} y={y} yaw=0.0\n"
             f"Estimated time: {rng.randint(5, 120)} seconds.")
    return user, robot


def _pick(rng: random.Random) -> tuple[str, str]:
    obj, place, arm = rng.choice(OBJECTS), rng.choice(PLACES), rng.choice(ARMS)
    user = f"{rng.choice(POLITE)}pick up the {obj} in the {place}"
    robot = (f"{rng.choice(ACKS)} I will pick up the {obj} with my {arm}.\n"
             f"[cmd] navigate_to goal=\"{place}\"\n"
             f"[cmd] detect object=\"{obj}\"\n"
             f"[cmd] grasp object=\"{obj}\" effector=\"{arm}\" force={rng.randint(5, 40)}N")
    return user, robot


def _bring(rng: random.Random) -> tuple[str, str]:
    obj, src, dst = rng.choice(OBJECTS), rng.choice(PLACES), rng.choice(PLACES)
    user = f"{rng.choice(POLITE)}bring the {obj} from the {src} to the {dst}"
    robot = (f"{rng.choice(ACKS)} Fetching the {obj} from the {src}.\n"
             f"[cmd] navigate_to goal=\"{src}\"\n"
             f"[cmd] grasp object=\"{obj}\"\n"
             f"[cmd] navigate_to goal=\"{dst}\"\n"
             f"[cmd] release object=\"{obj}\"")
    return user, robot


def _status(rng: random.Random) -> tuple[str, str]:
    user = rng.choice(["what is your battery level?", "status report", "how are you doing?",
                       "where are you?", "are you ready?"])
    robot = (f"Battery at {rng.randint(5, 100)}%. Current location: {rng.choice(PLACES)}. "
             f"Motors {rng.choice(['nominal', 'warm', 'nominal'])}, "
             f"{rng.randint(0, 3)} tasks in queue.\n[cmd] report status")
    return user, robot


def _turn(rng: random.Random) -> tuple[str, str]:
    deg = rng.choice([15, 30, 45, 90, 135, 180, 270, 360])
    side = rng.choice(["left", "right"])
    user = f"{rng.choice(POLITE)}turn {side} {deg} degrees"
    rad = round(deg * 3.14159 / 180 * (1 if side == "left" else -1), 3)
    robot = f"{rng.choice(ACKS)} Rotating {deg} degrees to the {side}.\n[cmd] rotate angle={rad} rad"
    return user, robot


def _stop(rng: random.Random) -> tuple[str, str]:
    user = rng.choice(["stop!", "stop right there", "halt", "emergency stop", "wait, stop"])
    robot = "Stopping now.\n[cmd] cmd_vel linear.x=0.0 angular.z=0.0\n[cmd] brake engage=true"
    return user, robot


def _unclear(rng: random.Random) -> tuple[str, str]:
    obj = rng.choice(OBJECTS)
    user = f"{rng.choice(POLITE)}get the thing over there"
    robot = (f"I am not sure which object you mean. I can see a {obj} and a "
             f"{rng.choice(OBJECTS)}. Which one should I get?")
    return user, robot


TURNS = [_move, _go, _pick, _bring, _status, _turn, _stop, _unclear]


def dialogue(rng: random.Random) -> str:
    """Generate one multi-turn dialogue."""
    lines: list[str] = []
    for _ in range(rng.randint(3, 8)):
        user, robot = rng.choice(TURNS)(rng)
        lines.append(f"USER: {user[0].upper() + user[1:]}")
        lines.append(f"ROBOT: {robot}")
        if rng.random() < 0.3:
            lines.append(f"ROBOT: {rng.choice(DONE)}")
    return "\n".join(lines) + "\n"


def build_documents(seed: int = 0, n_docs: int = 3000) -> list[str]:
    """Return ``n_docs`` dialogues from a fixed-seed generator."""
    rng = random.Random(seed)
    return [dialogue(rng) for _ in range(n_docs)]
