"""What a home/service robot's users say, by domain: the questions the SmolLM2 corpora answer.

Five domains a robot's user talks about, each a grammar of requests with slots, so a few
hundred distinct questions per domain come from a few lines each (deterministic for a seed):

* ``commands``: errands, movement, status and settings ("bring me the red cup from the kitchen");
* ``code``: programming and ROS 2 help ("write a Python function that ...", "what is a ROS topic?");
* ``math``: arithmetic, percentages and unit conversions ("convert 5 miles to kilometers");
* ``howto``: household how-to and safety ("how do I descale a kettle?", "is it safe to ...?");
* ``chat``: small talk with the robot ("good morning! how are you?", "tell me a joke about cats").
  General knowledge is left to the general draft: its answers share little text from one
  question to the next, so a specialist could not lead there (the first build's chat domain
  mixed both and led the general draft by only +0.041).

The answers are the target's own (:mod:`training.smollm2.answers`): what the node will decode.
"""
from __future__ import annotations

import random
from collections.abc import Callable

SYSTEM_PROMPT = "You are a helpful home service robot. Keep your answers short and clear."
"""Every corpus conversation opens with it, and so do the demo and the benchmark's sessions."""

ROOMS = ["kitchen", "living room", "bedroom", "bathroom", "garage", "hallway", "office", "dining room",
         "laundry room", "garden", "basement", "balcony", "children's room", "pantry"]
OBJECTS = ["red cup", "blue mug", "water bottle", "remote control", "phone charger", "newspaper", "book",
           "glasses", "keys", "towel", "laptop", "umbrella", "plate", "apple", "bowl of fruit", "toolbox",
           "screwdriver", "medicine box", "blanket", "pair of slippers", "backpack", "flower vase", "broom"]
PLACES = ["table", "sofa", "shelf", "counter", "desk", "bed", "chair", "windowsill", "floor", "fridge"]
POLITE = ["", "Please ", "Could you ", "Can you ", "Hey robot, ", "Robot, ", "I need you to ", "Would you "]
DEVICES = ["lights", "heating", "air conditioning", "TV", "music", "fan", "coffee machine", "dishwasher",
           "washing machine", "vacuum"]
PEOPLE = ["grandma", "my son", "my daughter", "the guest", "my wife", "my husband", "the kids", "dad"]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def commands(rng: random.Random) -> str:
    """Errands, movement, status and settings."""
    obj, room, place, p = rng.choice(OBJECTS), rng.choice(ROOMS), rng.choice(PLACES), rng.choice(POLITE)
    forms = [
        lambda: f"{p}bring me the {obj} from the {room}.",
        lambda: f"{p}go to the {room} and check if the window is closed.",
        lambda: f"{p}pick up the {obj} on the {place} and put it in the {rng.choice(ROOMS)}.",
        lambda: f"{p}turn {rng.choice(['on', 'off'])} the {rng.choice(DEVICES)} in the {room}.",
        lambda: f"{p}move {rng.choice(['forward', 'back', 'left', 'right'])} {rng.randint(1, 9)} meters.",
        lambda: f"{p}find my {obj}. I think I left it in the {room}.",
        lambda: f"{p}remind me to {rng.choice(['call the doctor', 'water the plants', 'take my pills', 'buy milk', 'feed the cat'])} at {rng.randint(1, 12)} {rng.choice(['am', 'pm'])}.",
        lambda: f"{p}follow me to the {room}.",
        lambda: f"{p}clean the {place} in the {room}.",
        lambda: f"{p}tell {rng.choice(PEOPLE)} that dinner is ready.",
        lambda: f"{p}set the temperature in the {room} to {rng.randint(17, 26)} degrees.",
        lambda: f"{p}open the {rng.choice(['front door', 'garage door', 'curtains', 'blinds', 'window'])}.",
        lambda: "What is your battery level?",
        lambda: f"How long until you finish {rng.choice(['charging', 'cleaning the kitchen', 'the laundry', 'your current task'])}?",
        lambda: "Where are you right now?",
        lambda: f"Is anyone in the {room}?",
        lambda: f"Did you {rng.choice(['lock the front door', 'close the windows', 'turn off the oven', 'feed the dog', 'water the plants'])}?",
        lambda: f"{p}stop what you are doing and come to the {room}.",
        lambda: f"{p}go back to your charging station.",
        lambda: "What tasks do you have left for today?",
        lambda: f"{p}check whether we still have {rng.choice(['milk', 'eggs', 'bread', 'coffee', 'apples', 'rice'])} in the fridge.",
        lambda: f"{p}put the {obj} back where it belongs.",
        lambda: f"{p}wake me up at {rng.randint(5, 9)}:{rng.choice(['00', '15', '30', '45'])} tomorrow.",
        lambda: f"Why did you stop in the {room}?",
    ]
    return rng.choice(forms)()


TASKS = ["returns the average of a list of numbers", "checks whether a string is a palindrome",
         "counts the vowels in a string", "returns the largest of three numbers", "reverses a list",
         "converts Celsius to Fahrenheit", "returns True when a battery voltage is below {v} volts",
         "computes the factorial of n", "removes duplicates from a list", "returns the n-th Fibonacci number",
         "checks whether a number is prime", "sums the even numbers in a list", "reads a text file and counts its lines",
         "clamps a value between a minimum and a maximum", "computes the distance between two 2D points",
         "converts meters per second to kilometers per hour", "merges two dictionaries",
         "finds the most common word in a sentence", "sorts a list of robot names alphabetically",
         "returns the median of a list", "checks whether a year is a leap year",
         "converts an angle from degrees to radians", "flattens a list of lists"]
LANGS = ["Python", "Python", "Python", "C++", "JavaScript", "Bash"]
ROS_TOPICS = ["a ROS 2 topic", "a ROS 2 service", "a ROS 2 action", "a launch file", "a ROS 2 node",
              "a URDF file", "tf2 transforms", "the ROS 2 parameter server", "a lifecycle node", "colcon",
              "rviz", "a quality of service profile", "rosbag", "the navigation stack", "a message type"]
PY_TOPICS = ["a list comprehension", "a Python dictionary", "a for loop", "exceptions in Python",
             "a class in Python", "a lambda function", "recursion", "a Python generator", "f-strings",
             "virtual environments", "the difference between a list and a tuple", "git branches",
             "unit tests", "a REST API", "JSON", "a while loop", "type hints in Python"]


def code(rng: random.Random) -> str:
    """Programming and ROS 2 help."""
    task = rng.choice(TASKS).format(v=rng.choice([11.2, 11.8, 12.0, 23.5, 3.3]))
    forms = [
        lambda: f"Write a short {rng.choice(LANGS)} function that {task}.",
        lambda: f"Write a Python function that {task}.",
        lambda: f"Explain what {rng.choice(ROS_TOPICS)} is.",
        lambda: f"How do I create {rng.choice(['a publisher', 'a subscriber', 'a service', 'a timer', 'a node'])} in ROS 2 with Python?",
        lambda: f"What is {rng.choice(PY_TOPICS)}?",
        lambda: f"Explain {rng.choice(PY_TOPICS)} with an example.",
        lambda: f"What does this code do?\n```python\nprint(sum(x * x for x in range({rng.randint(3, 20)})))\n```",
        lambda: f"How do I {rng.choice(['install a Python package', 'read a CSV file in Python', 'run a Python script', 'check my Python version', 'list files in a folder in Bash', 'make a file executable in Linux', 'see which ROS 2 topics are running'])}?",
        lambda: f"Fix this Python code: `for i in range({rng.randint(3, 9)}) print(i)`",
        lambda: f"Write a {rng.choice(LANGS)} loop that prints the numbers from 1 to {rng.randint(5, 20)}.",
        lambda: f"What is the difference between {rng.choice(['a topic and a service', 'a list and a set', 'git pull and git fetch', 'an int and a float', 'TCP and UDP', 'a process and a thread'])}?",
    ]
    return rng.choice(forms)()


UNITS = [("miles", "kilometers"), ("kilometers", "miles"), ("pounds", "kilograms"), ("kilograms", "pounds"),
         ("inches", "centimeters"), ("feet", "meters"), ("liters", "gallons"), ("Celsius", "Fahrenheit"),
         ("Fahrenheit", "Celsius"), ("hours", "minutes"), ("minutes", "seconds"), ("meters", "feet"),
         ("cups", "milliliters"), ("ounces", "grams"), ("km/h", "m/s")]


def math(rng: random.Random) -> str:
    """Arithmetic, percentages and unit conversions."""
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    src, dst = rng.choice(UNITS)
    forms = [
        lambda: f"What is {a} times {b}?",
        lambda: f"What is {a * rng.randint(2, 9)} divided by {rng.randint(2, 9)}?",
        lambda: f"What is {a} plus {b * 10}?",
        lambda: f"What is {a * 10} minus {b}?",
        lambda: f"Convert {rng.randint(1, 120)} {src} to {dst}.",
        lambda: f"How many {dst} are in {rng.choice([1, 2, 3, 5, 10, 2.5, 0.5])} {src}?",
        lambda: f"What is {rng.choice([5, 10, 15, 20, 25, 50, 75])}% of {rng.randint(2, 100) * 10}?",
        lambda: f"What is the square root of {rng.choice([16, 25, 36, 49, 64, 81, 100, 144, 169, 225])}?",
        lambda: f"What is {a} squared?",
        lambda: f"If a robot moves at {rng.randint(1, 5)} meters per second, how far does it go in {rng.randint(2, 60)} seconds?",
        lambda: f"I have {a} apples and give away {min(a - 1, b)}. How many are left?",
        lambda: f"Solve for x: {rng.randint(2, 9)}x + {a} = {a + rng.randint(2, 9) * rng.randint(1, 12)}.",
        lambda: f"What is the area of a rectangle that is {rng.randint(2, 20)} meters by {rng.randint(2, 20)} meters?",
        lambda: f"A battery has {rng.choice([2000, 3000, 5000, 10000])} mAh and the robot uses {rng.choice([250, 500, 1000])} mA. How many hours does it last?",
        lambda: f"Round {rng.uniform(1, 100):.3f} to one decimal place.",
        lambda: f"What is {a}/{b} as a decimal?",
    ]
    return rng.choice(forms)()


CHORES = ["descale a kettle", "clean the oven", "unclog a sink", "remove a red wine stain", "iron a shirt",
          "clean a window without streaks", "defrost a freezer", "wash a wool sweater", "clean a cast iron pan",
          "get rid of fruit flies", "sharpen a kitchen knife", "hang a picture on the wall", "change a light bulb",
          "reset a tripped circuit breaker", "clean the filter of a vacuum cleaner", "store fresh herbs",
          "fold a fitted sheet", "remove limescale from a shower head", "clean a microwave", "boil an egg",
          "make a cup of tea", "water a cactus", "keep bread fresh", "clean a laptop keyboard",
          "remove rust from a bike chain", "clean grout between tiles", "get rid of a bad smell in the fridge",
          "cook rice on the stove", "clean a stainless steel sink", "repot a plant", "fix a squeaky door",
          "clean a yoga mat", "wash a pillow", "remove chewing gum from clothes", "clean a coffee machine",
          "bleed a radiator", "patch a small hole in a wall", "clean a mattress", "polish wooden furniture"]
HAZARDS = ["leave a candle burning when I leave the room", "mix bleach and vinegar", "use a ladder alone",
           "put metal in the microwave", "charge my phone overnight", "leave the stove on low while I go out",
           "use an extension cord for a heater", "touch a light switch with wet hands",
           "store cleaning products under the sink", "let the kids play near the stairs",
           "run the dishwasher at night", "leave a space heater on while sleeping", "eat food after the expiry date"]


def howto(rng: random.Random) -> str:
    """Household how-to and safety."""
    forms = [
        lambda: f"How do I {rng.choice(CHORES)}?",
        lambda: f"What is the best way to {rng.choice(CHORES)}?",
        lambda: f"Is it safe to {rng.choice(HAZARDS)}?",
        lambda: f"Give me {rng.randint(3, 5)} tips to {rng.choice(['save energy at home', 'keep the kitchen clean', 'sleep better', 'make the house safe for a toddler', 'prevent mold in the bathroom', 'organize a closet', 'reduce food waste', 'keep the house cool in summer'])}.",
        lambda: f"My {rng.choice(['smoke alarm', 'fridge', 'dishwasher', 'washing machine', 'wifi router', 'toilet', 'heater'])} {rng.choice(['keeps beeping', 'is making a strange noise', 'stopped working', 'is leaking water', 'smells bad'])}. What should I do?",
        lambda: f"What should I do if {rng.choice(['someone burns their hand', 'the power goes out', 'I smell gas', 'a pipe bursts', 'someone faints', 'the kitchen fills with smoke', 'a child swallows a small object'])}?",
        lambda: f"How often should I {rng.choice(['change the bed sheets', 'clean the fridge', 'replace a toothbrush', 'test the smoke alarm', 'water houseplants', 'clean the bathroom', 'defrost the freezer'])}?",
        lambda: f"What do I need to {rng.choice(['bake bread', 'paint a room', 'plant tomatoes', 'set up a home office', 'build a bookshelf', 'pack for a weekend trip'])}?",
    ]
    return rng.choice(forms)()


GREETINGS = ["Good morning", "Good evening", "Good afternoon", "Hi", "Hello", "Hey there"]
HOW_ARE_YOU = ["How are you today?", "How is your day going?", "Did you have a good night?",
               "What have you been up to?", "Anything new today?", "Are you ready for today?"]
FEELINGS = ["feel tired", "am so happy", "feel a bit sad", "am stressed", "feel lonely", "am bored",
            "am excited", "feel great", "am nervous", "feel grumpy"]
WHY = ["today", "after work", "this morning", "because it is raining", "because of my exams",
       "since the weekend", "and I do not know why"]
THANKS = ["bringing me the cup", "cleaning the kitchen", "reminding me about my pills", "your help today",
          "watering the plants", "reading to the kids", "the coffee", "tidying up the living room",
          "finding my keys", "waking me up on time"]
ABOUT_YOU = ["What is your name?", "How old are you?", "Do you dream?", "Do you have feelings?",
             "What is your favorite food?", "Do you ever get tired?", "Are you happy?", "Can you laugh?",
             "Do you like your job?", "What do you do when I am asleep?", "Who made you?",
             "Are you smarter than me?", "Do you get lonely?", "What makes you happy?", "Do you have friends?",
             "What do you think about humans?", "Can you sing a song?", "What do you do for fun?",
             "Do you like living here?", "Are you a boy or a girl?", "Do you sleep?", "Can we be friends?",
             "What did you do today?", "Do you ever get bored?", "Are you afraid of anything?",
             "What would you do if you were human?", "Do you like me?", "What is your dream?"]
LIKES = ["music", "cats", "dogs", "rain", "snow", "dancing", "pizza", "football", "movies", "books", "summer",
         "chess", "coffee", "flowers", "the ocean", "jokes", "video games", "painting", "the weekend",
         "birthdays"]
FAVORITES = ["color", "song", "movie", "animal", "season", "book", "game", "food", "holiday", "number",
             "room in the house", "time of day"]
OPINIONS = ["pizza", "winter", "cats and dogs", "video games", "coffee", "early mornings", "my new haircut",
            "rainy days", "homework", "vacuum cleaners", "other robots", "Mondays"]
JOKE_TOPICS = ["robots", "cats", "computers", "cooking", "the weather", "school", "dogs", "vacuum cleaners",
               "bananas", "the kitchen", "math", "sleep", "coffee", "birthdays"]
STORY_TOPICS = ["a brave little robot", "a cat", "the moon", "a dragon", "a lost sock", "friendship",
                "a rainy day", "the sea", "a magic garden", "a sleepy bear"]
WHEN = ["this weekend", "tonight", "on a rainy day", "on my day off", "after dinner", "when I can not sleep",
        "to relax", "for my birthday"]
PLANS = ["visit my parents", "go to the gym", "watch a movie", "go for a walk", "bake a cake", "read a book",
         "go to bed", "have a party"]
GOODBYES = ["Good night", "See you later", "Bye", "I am off to work"]


def chat(rng: random.Random) -> str:
    """Small talk with the robot: greetings, feelings, thanks, questions about it, jokes and stories."""
    forms = [
        lambda: f"{rng.choice(GREETINGS)}! {rng.choice(HOW_ARE_YOU)}",
        lambda: f"I {rng.choice(FEELINGS)} {rng.choice(WHY)}.{rng.choice(['', ' What should I do?'])}",
        lambda: f"Thank you for {rng.choice(THANKS)}{rng.choice(['!', '. You are great.', '. What would I do without you?'])}",
        lambda: rng.choice(ABOUT_YOU),
        lambda: f"Do you like {rng.choice(LIKES)}?",
        lambda: f"What is your favorite {rng.choice(FAVORITES)}?",
        lambda: f"What do you think about {rng.choice(OPINIONS)}?",
        lambda: f"Tell me a {rng.choice(['joke', 'funny story', 'riddle', 'pun'])} about {rng.choice(JOKE_TOPICS)}.",
        lambda: rng.choice(["Can you cheer me up?", "Say something nice to me.", "Tell me something interesting.",
                            "Can you tell me a story?", "Give me a compliment.", "I am bored. Entertain me."]),
        lambda: f"Tell me a short {rng.choice(['bedtime story', 'story', 'poem'])} about {rng.choice(STORY_TOPICS)}.",
        lambda: f"What should I do {rng.choice(WHEN)}?",
        lambda: f"I am going to {rng.choice(PLANS)} {rng.choice(['later', 'tonight', 'tomorrow', 'this weekend'])}.",
        lambda: f"{rng.choice(GOODBYES)}, robot.{rng.choice(['', ' Take care of the house.', ' Have a nice day.', ' Sleep well.'])}",
    ]
    return rng.choice(forms)()


DOMAINS: dict[str, Callable[[random.Random], str]] = {
    "commands": commands, "code": code, "math": math, "howto": howto, "chat": chat}
"""In this order: ``commands`` first, the robot's main task (the benchmark's home domain)."""


OPENERS = ["", "", "", "", "Quick question: ", "Hey, ", "I was wondering, ", "Robot, "]
"""People open a question in a few ways; the smaller grammars reach a few hundred questions with them."""


def questions(domain: str, count: int, seed: int = 0) -> list[str]:
    """``count`` distinct questions of ``domain`` (fewer if its grammar runs out), deterministic."""
    rng = random.Random(f"{domain}:{seed}")
    out: dict[str, None] = {}
    for _ in range(count * 50):
        if len(out) >= count:
            break
        text = _cap(DOMAINS[domain](rng).strip())
        if domain != "commands":
            opener = rng.choice(OPENERS)
            text = opener + (text[:1].lower() + text[1:] if opener else text)
        out[text] = None
    return list(out)
