"""What a home/service robot's users say, by domain: the questions the SmolLM2 corpora answer.

Five domains a robot's user talks about, each a grammar of requests with slots, so a few
hundred distinct questions per domain come from a few lines each (deterministic for a seed):

* ``commands``: errands, movement, status and settings ("bring me the red cup from the kitchen");
* ``code``: programming and ROS 2 help ("write a Python function that ...", "what is a ROS topic?");
* ``math``: arithmetic, percentages and unit conversions ("convert 5 miles to kilometers");
* ``howto``: household how-to and safety ("how do I descale a kettle?", "is it safe to ...?");
* ``chat``: small talk with the robot ("tell me a joke", "I feel a bit sad today.").

Besides them, ``general`` (:data:`GENERAL_TOPICS`): what users ask outside every domain (sports,
history, words, advice, shopping, pets, trips, general knowledge such as "what is the capital of
Peru?"), the general draft's own text when the model set is
built with ``memspec_build drafts --general-corpus``: a fallback for turns no specialist covers,
trained on none of the domains' questions.

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


COUNTRIES = ["France", "Japan", "Peru", "Canada", "Kenya", "Italy", "Australia", "Norway", "Brazil", "Egypt",
             "India", "Mexico", "Spain", "Germany", "Chile", "Vietnam", "Portugal", "Greece", "Sweden",
             "Argentina", "Thailand", "Morocco", "Ireland", "Poland", "Turkey", "Nigeria", "Finland", "Cuba"]
THINGS = ["the sun", "the moon", "rain", "a rainbow", "thunder", "the ocean", "a volcano", "an eclipse",
          "gravity", "electricity", "a computer", "the internet", "a battery", "a magnet", "photosynthesis",
          "a fridge", "a microwave", "a bicycle", "an airplane", "a rocket", "wifi", "a camera", "the heart",
          "a compass", "a solar panel", "GPS", "a thermometer", "a vaccine", "a lightning rod"]


JOKE_SUBJECTS = ["robots", "cats", "computers", "cooking", "the weather", "school", "dogs", "vacuum cleaners",
                 "Mondays", "coffee", "socks", "bananas"]
AMUSEMENTS = ["a joke", "a funny story", "a riddle"]
VERSE = ["a short poem", "a haiku", "a little song"]
VERSE_SUBJECTS = ["the rain", "a cat", "the morning", "friendship", "a robot", "autumn", "the sea", "my garden",
                  "a sleepy dog", "the stars", "breakfast", "a snowy day"]
SMALL_TALK = ["How are you today?", "What is your name?", "Do you like music?", "What do you do for fun?",
              "Are you happy?", "Do you ever get tired?", "Good morning! How did you sleep?", "Can you sing a song?",
              "Do you have friends?", "What do you think about humans?", "Thank you for your help today!",
              "I am bored. What should I do?", "I had a long day at work.", "Good night, robot.",
              "Do you dream?", "How old are you?", "What makes you happy?", "Do you like your job?",
              "Can we be friends?", "You are doing a great job.", "Do you get lonely when we are out?",
              "What did you do while I was away?", "Are you smarter than me?", "Can you tell me something nice?",
              "I am going to bed now.", "I am back home!", "Do you have a favorite person?",
              "What is the best part of your day?", "Can you keep a secret?", "Do you like living here?"]
RECOMMENDATIONS = ["book", "movie", "game for kids", "board game", "podcast", "hobby", "recipe for dinner",
                   "song for a rainy day", "TV show", "name for my new cat", "fun thing to do on Sunday",
                   "snack for movie night"]
OPINIONS = ["pizza", "winter", "cats and dogs", "video games", "coffee", "early mornings", "rainy days",
            "pineapple on pizza", "jazz music", "summer holidays", "dancing", "my new haircut"]
FAVORITES = ["color", "food", "season", "animal", "song", "movie", "book", "game", "holiday", "room in the house",
             "time of day", "word"]
MOODS = ["a bit sad", "really happy", "lonely", "stressed", "excited", "nervous", "tired", "grumpy", "proud",
         "a little bored"]
NEWS = ["got a new job", "finished my first marathon", "burned the dinner", "lost my keys again",
        "passed my driving test", "adopted a kitten", "had a fight with my friend", "started learning to paint",
        "won a board game against the kids", "came back from a holiday"]
LIKES = ["music", "dancing", "the rain", "jokes", "cats", "sunny days", "chess", "stories", "gardening",
         "movies", "cleaning", "talking to people"]
FREE_TIME = ["this weekend", "this evening", "on a rainy afternoon", "on my day off", "with the kids today",
             "before dinner", "on a lazy Sunday", "after work"]


def chat(rng: random.Random) -> str:
    """Small talk with the robot: how it is, how the user is, jokes, riddles, poems, tastes, suggestions, kind
    words for someone, the user's news and free time.

    General knowledge (capitals, how things work, famous people) is in :func:`general`: it is the
    fallback's text, and a chat draft that also had to learn it led the general draft by less."""
    forms = [
        lambda: f"Tell me {rng.choice(AMUSEMENTS)} about {rng.choice(JOKE_SUBJECTS)}.",
        lambda: rng.choice(SMALL_TALK),  # listed twice on purpose: the fixed small talk weighs double
        lambda: rng.choice(SMALL_TALK),
        lambda: f"Write {rng.choice(VERSE)} about {rng.choice(VERSE_SUBJECTS)}.",
        lambda: f"Can you recommend a {rng.choice(RECOMMENDATIONS)}?",
        lambda: f"What is your opinion on {rng.choice(OPINIONS)}?",
        lambda: f"What is your favorite {rng.choice(FAVORITES)}?",
        lambda: f"I feel {rng.choice(MOODS)} today.",
        lambda: f"Guess what, I {rng.choice(NEWS)}!",
        lambda: f"Do you like {rng.choice(LIKES)}?",
        lambda: f"What should I do {rng.choice(FREE_TIME)}?",
        lambda: f"Say something nice to {rng.choice(PEOPLE)}.",
    ]
    return rng.choice(forms)()


DOMAINS: dict[str, Callable[[random.Random], str]] = {
    "commands": commands, "code": code, "math": math, "howto": howto, "chat": chat}
"""In this order: ``commands`` first, the robot's main task (the benchmark's home domain)."""

SPORTS = ["soccer", "basketball", "tennis", "chess", "cricket", "baseball", "volleyball", "golf", "rugby",
          "table tennis", "ice hockey", "badminton"]
SKILLS = ["running", "swimming", "drawing", "playing the guitar", "public speaking", "learning Spanish",
          "writing essays", "photography", "meditation", "playing the piano", "typing", "remembering names"]
EVENTS = ["the French Revolution", "the moon landing", "the fall of the Berlin Wall", "the Industrial Revolution",
          "the Renaissance", "World War I", "the invention of the printing press", "the Roman Empire",
          "the Olympic Games in ancient Greece", "the discovery of penicillin"]
WORDS = ["serendipity", "ephemeral", "ubiquitous", "nostalgia", "resilient", "paradox", "empathy", "meticulous",
         "pragmatic", "whimsical", "irony", "procrastination"]
SITUATIONS = ["a job interview", "a first date", "saving money", "a long flight", "studying for exams",
              "moving to a new city", "a birthday party", "making new friends", "a camping trip",
              "working from home"]
PAIRS = [("a virus", "bacteria"), ("weather", "climate"), ("a crocodile", "an alligator"),
         ("stocks", "bonds"), ("a lake", "a pond"), ("a frog", "a toad"), ("a violin", "a viola"),
         ("a comet", "an asteroid"), ("a novel", "a short story"), ("a debit card", "a credit card")]
STORIES = ["Romeo and Juliet", "The Odyssey", "Cinderella", "Moby Dick", "Robinson Crusoe",
           "Alice in Wonderland", "Hamlet", "Don Quixote", "The Little Prince", "Frankenstein"]
PURCHASES = ["a laptop", "a used car", "running shoes", "a mattress", "a camera", "a smartphone", "a tent",
             "headphones", "a winter coat", "a guitar"]
PETS = ["hamster", "goldfish", "rabbit", "parrot", "puppy", "kitten", "turtle", "guinea pig"]
CONCEPTS = ["inflation", "democracy", "evolution", "climate change", "interest rates", "supply and demand",
            "the immune system", "black holes", "taxes", "the stock market", "jet lag", "recycling"]
CITIES = ["Paris", "Tokyo", "Rome", "New York", "Barcelona", "Lisbon", "Prague", "Sydney", "Cairo", "Istanbul"]
FACT_SUBJECTS = ["octopuses", "space", "bees", "penguins", "the ocean", "dinosaurs", "honey", "elephants",
                 "the human brain"]
FAMOUS = ["Albert Einstein", "Marie Curie", "Isaac Newton", "Ada Lovelace", "Leonardo da Vinci", "Alan Turing",
          "Nikola Tesla"]


def general(rng: random.Random) -> str:
    """Outside every domain: sports, history, words, advice, shopping, pets, concepts, trips and general
    knowledge (capitals, languages, how things work, famous people)."""
    forms = [
        lambda: f"What are the rules of {rng.choice(SPORTS)}?",
        lambda: f"How can I get better at {rng.choice(SKILLS)}?",
        lambda: f"What happened during {rng.choice(EVENTS)}?",
        lambda: f"What does the word '{rng.choice(WORDS)}' mean?",
        lambda: f"Give me some tips for {rng.choice(SITUATIONS)}.",
        lambda: "What is the difference between {} and {}?".format(*rng.choice(PAIRS)),
        lambda: f"Summarize the story of {rng.choice(STORIES)}.",
        lambda: f"What should I look for when buying {rng.choice(PURCHASES)}?",
        lambda: f"How do I take care of a {rng.choice(PETS)}?",
        lambda: f"Explain {rng.choice(CONCEPTS)} in simple terms.",
        lambda: f"Plan a {rng.choice(['one', 'two', 'three', 'four'])}-day trip to {rng.choice(CITIES)}.",
        lambda: f"Why do people enjoy {rng.choice(SPORTS + SKILLS)}?",
        lambda: f"What is the capital of {rng.choice(COUNTRIES)}?",
        lambda: f"What language do people speak in {rng.choice(COUNTRIES)}?",
        lambda: f"Why is {rng.choice(['the sky blue', 'the sea salty', 'grass green', 'ice slippery', 'the sun hot'])}?",
        lambda: f"How does {rng.choice(THINGS)} work?",
        lambda: f"Tell me a fun fact about {rng.choice(FACT_SUBJECTS)}.",
        lambda: f"Who was {rng.choice(FAMOUS)}?",
    ]
    return rng.choice(forms)()


GENERAL_TOPICS = "general"
"""The grammar of questions outside every domain (:func:`general`), for the general draft's corpus."""

GRAMMARS: dict[str, Callable[[random.Random], str]] = {**DOMAINS, GENERAL_TOPICS: general}
"""Every grammar :func:`questions` draws from: the domains, then the general topics."""


OPENERS = ["", "", "", "", "Quick question: ", "Hey, ", "I was wondering, ", "Robot, "]
"""People open a question in a few ways; the smaller grammars reach a few hundred questions with them."""


def questions(domain: str, count: int, seed: int = 0) -> list[str]:
    """``count`` distinct questions of ``domain`` (a key of :data:`GRAMMARS`; fewer if its grammar runs
    out), deterministic."""
    rng = random.Random(f"{domain}:{seed}")
    out: dict[str, None] = {}
    for _ in range(count * 50):
        if len(out) >= count:
            break
        text = _cap(GRAMMARS[domain](rng).strip())
        if domain != "commands":
            opener = rng.choice(OPENERS)
            keep = not opener or text.startswith(("I ", "I'"))  # "Hey, I feel ...", not "i feel"
            text = opener + (text if keep else text[:1].lower() + text[1:])
        out[text] = None
    return list(out)
