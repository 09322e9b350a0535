"""Value pools and phrasing templates of the persona scenario.

Kept apart from the generator so that the wording can grow without touching
the logic. Every fact slot has several phrasings for stating a value, for
stating a change, and for each question kind, so that text varies.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "SlotText",
    "SLOTS",
    "SMALL_TALK",
    "ASSISTANT_REPLIES",
    "BOOK_REQUESTS",
    "BOOK_RECOMMENDATIONS",
    "ASK_RECOMMENDATION",
]

_CITIES = (
    "Lisbon", "Porto", "Berlin", "Hamburg", "Vienna", "Prague", "Madrid", "Valencia", "Seville",
    "Dublin", "Edinburgh", "Oslo", "Copenhagen", "Stockholm", "Helsinki", "Warsaw", "Krakow",
    "Budapest", "Zurich", "Geneva", "Lyon", "Marseille", "Toronto", "Montreal", "Denver",
    "Austin", "Seattle", "Portland", "Melbourne", "Auckland",
)
_EMPLOYERS = (
    "Northwind Logistics", "Bluepeak Analytics", "Harbor Health", "Quillstone Press",
    "Redwood Robotics", "Lumen Energy", "Atlas Insurance", "Cobalt Games", "Evergreen Foods",
    "Meridian Bank", "Orbit Telecom", "Pinecrest University", "Sable Architecture",
    "Tidewater Shipping", "Vantage Media", "Willow Pharmaceuticals", "Ironbridge Consulting",
    "Kestrel Aerospace", "Saffron Hotels", "Granite Construction Co",
)
_TITLES = (
    "data analyst", "software engineer", "product manager", "nurse", "teacher", "accountant",
    "graphic designer", "project coordinator", "marketing lead", "research scientist",
    "sales manager", "civil engineer", "copy editor", "operations director", "UX researcher",
    "financial advisor", "pharmacist", "architect", "logistics planner", "quality engineer",
)
_PARTNERS = (
    "Alex", "Sam", "Jordan", "Priya", "Mateo", "Yuki", "Amara", "Luca", "Noor", "Elena",
    "Tomas", "Ines", "Kofi", "Freya", "Ravi", "Camille", "Diego", "Hana", "Oskar", "Leila",
)
_PET_SPECIES = ("dog", "cat", "rabbit", "parrot", "hamster", "tortoise", "guinea pig", "ferret")
_PET_NAMES = (
    "Biscuit", "Pepper", "Mochi", "Luna", "Ziggy", "Olive", "Nacho", "Clover", "Pixel", "Waffles",
    "Juniper", "Rocket", "Pickles", "Maple", "Sprout", "Bean", "Comet", "Hazel", "Tofu", "Figaro",
)
_HOBBIES = (
    "rock climbing", "pottery", "chess", "birdwatching", "salsa dancing", "woodworking",
    "trail running", "watercolour painting", "sourdough baking", "astronomy", "kayaking",
    "knitting", "photography", "gardening", "archery", "calligraphy", "cycling", "origami",
)
_DIETS = ("vegetarian", "vegan", "pescatarian", "keto", "gluten-free", "dairy-free", "low-carb", "Mediterranean")
_FOODS = (
    "ramen", "paella", "tacos al pastor", "mushroom risotto", "pad thai", "butter chicken",
    "sushi", "moussaka", "pho", "shakshuka", "pierogi", "lasagne", "falafel wraps", "bibimbap",
)
_MUSIC = (
    "jazz", "bossa nova", "techno", "folk", "classical piano", "indie rock", "hip hop", "blues",
    "synthwave", "reggae", "opera", "bluegrass", "k-pop", "ambient electronic",
)
_BOOKS = (
    "Dune", "Middlemarch", "The Left Hand of Darkness", "Beloved", "The Name of the Rose",
    "Pride and Prejudice", "Neuromancer", "One Hundred Years of Solitude", "The Remains of the Day",
    "Station Eleven", "Moby-Dick", "The Master and Margarita", "Piranesi", "Never Let Me Go",
)
_TRIPS = (
    "Japan", "Iceland", "Morocco", "Peru", "Vietnam", "Norway", "Greece", "Mexico", "Kenya",
    "New Zealand", "Scotland", "Chile", "Portugal", "Canada", "Sri Lanka", "Croatia",
)
_HEALTH = (
    "knee surgery", "a broken wrist", "a bad flu", "a sprained ankle", "a back injury",
    "a minor eye operation", "a bout of migraines", "a dental implant", "a shoulder injury",
    "bronchitis",
)


@dataclass(frozen=True, slots=True)
class SlotText:
    """The values and phrasings of one fact slot."""

    values: tuple[str, ...]
    """Values the slot can take."""
    state: tuple[str, ...]
    """Ways the user states a value (``{v}``)."""
    change: tuple[str, ...]
    """Ways the user states a new value after a change (``{v}``)."""
    ask_current: tuple[str, ...]
    """Questions about the current value."""
    ask_previous: tuple[str, ...] = ()
    """Questions about the value before the current one (``{cur}``)."""
    ask_when: tuple[str, ...] = ()
    """Questions about when the current value was stated (``{cur}``)."""
    ask_count: tuple[str, ...] = ()
    """Counting questions across sessions (accumulating slots only)."""
    ask_preference: tuple[str, ...] = ()
    """Requests whose best answer depends on the value, without naming it."""
    accumulates: bool = False
    """True when new values add to the old ones (pets, hobbies) instead of replacing them."""


SLOTS: dict[str, SlotText] = {
    "home_city": SlotText(
        values=_CITIES,
        state=("I live in {v}.", "Home for me is {v} these days.", "I'm based in {v} right now.", "My flat is in {v}."),
        change=("I just moved to {v}!", "Big news: I relocated to {v} last week.", "I've finally settled into my new place in {v}.", "The move is done, I'm living in {v} now."),
        ask_current=("Where do I live now?", "Which city am I based in at the moment?", "What city is home for me these days?", "Remind me, which city do I live in?"),
        ask_previous=("Where did I live before {cur}?", "Which city was I in before moving to {cur}?", "Before {cur}, where was home for me?"),
        ask_when=("When did I move to {cur}?", "When did I relocate to {cur}?", "Around what date did I tell you I'd moved to {cur}?"),
    ),
    "employer": SlotText(
        values=_EMPLOYERS,
        state=("I work at {v}.", "My employer is {v}.", "I've got a job at {v}.", "I spend my weekdays at {v}."),
        change=("I started a new job at {v}!", "I switched companies, I'm at {v} now.", "First week at {v} done, new job!", "I accepted an offer from {v} and already started."),
        ask_current=("Where do I work?", "Which company am I working for now?", "Who is my current employer?"),
        ask_previous=("Where did I work before {cur}?", "Which company was I at before joining {cur}?"),
        ask_when=("When did I start at {cur}?", "When did I begin working for {cur}?"),
    ),
    "job_title": SlotText(
        values=_TITLES,
        state=("I'm a {v} by profession.", "I work as a {v}.", "My job title is {v}."),
        change=("My role changed, I'm now a {v}.", "I got a new title: {v}.", "These days I'm working as a {v}."),
        ask_current=("What is my job title?", "What do I do for a living now?", "What's my current role?"),
        ask_previous=("What was my job before I became a {cur}?", "What role did I have before {cur}?"),
        ask_when=("When did I become a {cur}?",),
    ),
    "partner": SlotText(
        values=_PARTNERS,
        state=("My partner's name is {v}.", "I'm in a relationship with {v}.", "{v} and I have been together for a while."),
        change=("I've started seeing someone new, {v}.", "I'm with {v} now, we met recently.", "New relationship news: I'm dating {v}."),
        ask_current=("What's my partner's name?", "Who am I in a relationship with?", "Who am I dating these days?"),
        ask_previous=("Who was I with before {cur}?", "Who was my partner before {cur}?"),
        ask_when=("When did I start seeing {cur}?",),
    ),
    "pets": SlotText(
        values=tuple(f"{n} the {s}" for n in _PET_NAMES for s in _PET_SPECIES),
        state=("I have a pet, {v}.", "At home I look after {v}.", "Let me introduce {v}, my pet."),
        change=("We just adopted {v}!", "New family member: {v}.", "I brought home {v} this week."),
        ask_current=("What's the name of my newest pet?", "Which pet did I get most recently?"),
        ask_when=("When did I get {cur}?", "When did {cur} join the family?"),
        ask_count=("How many pets have I had so far?", "How many pets have I told you about in total?", "Count them for me: how many pets have I had?"),
        accumulates=True,
    ),
    "hobbies": SlotText(
        values=_HOBBIES,
        state=("One of my hobbies is {v}.", "In my free time I do {v}.", "I really enjoy {v}."),
        change=("I've taken up {v}!", "New hobby alert: {v}.", "I signed up for a {v} class."),
        ask_current=("What hobby did I pick up most recently?", "What's the newest hobby I started?"),
        ask_when=("When did I take up {cur}?",),
        ask_count=("How many hobbies have I mentioned to you?", "How many different hobbies have I told you about?"),
        accumulates=True,
    ),
    "diet": SlotText(
        values=_DIETS,
        state=("I eat {v}.", "I follow a {v} diet.", "Food-wise, I'm {v}."),
        change=("I switched to a {v} diet.", "I've gone {v} since last week.", "New diet for me: {v}."),
        ask_current=("What diet do I follow?", "What kind of diet am I on now?"),
        ask_previous=("What diet did I follow before going {cur}?",),
        ask_when=("When did I switch to {cur}?",),
        ask_preference=("Can you suggest a dinner recipe for me?", "Plan a lunch menu that suits me.", "What should I cook this weekend?"),
    ),
    "favourite_food": SlotText(
        values=_FOODS,
        state=("My favourite food is {v}.", "Nothing beats {v} for me.", "I could eat {v} every day."),
        change=("Lately my favourite food is {v}.", "I'm obsessed with {v} now.", "New favourite dish: {v}."),
        ask_current=("What's my favourite food?", "Which dish do I love most right now?"),
        ask_previous=("What was my favourite food before {cur}?",),
        ask_preference=("What should I order for dinner tonight?", "Pick a restaurant dish I'd enjoy."),
    ),
    "favourite_music": SlotText(
        values=_MUSIC,
        state=("I mostly listen to {v}.", "My favourite music is {v}.", "{v} is my go-to music."),
        change=("I've been getting into {v} lately.", "These days it's all {v} for me.", "My playlists are full of {v} now."),
        ask_current=("What music do I like?", "What's my favourite kind of music?"),
        ask_previous=("What music was I into before {cur}?",),
        ask_preference=("Can you suggest something to listen to on my commute?", "Make me a playlist for the weekend."),
    ),
    "favourite_book": SlotText(
        values=_BOOKS,
        state=("My favourite book is {v}.", "I keep rereading {v}.", "{v} is the best book I know."),
        change=("I just finished {v} and it's my new favourite.", "{v} has become my favourite book.", "New favourite read: {v}."),
        ask_current=("What's my favourite book?", "Which book do I love most?"),
        ask_previous=("What was my favourite book before {cur}?",),
        ask_preference=("Any reading recommendations based on what I love?", "What should I read next, given my taste?"),
    ),
    "upcoming_trip": SlotText(
        values=_TRIPS,
        state=("I'm planning a trip to {v}.", "Next on my travel list is {v}, already booked.", "I'm going to {v} soon."),
        change=("Change of plans: my next trip is to {v}.", "I just booked flights to {v}!", "We're heading to {v} for our next holiday."),
        ask_current=("Where am I travelling next?", "What's my next trip destination?", "Where is my upcoming holiday?"),
        ask_previous=("Where was I planning to go before {cur}?",),
        ask_when=("When did I book the trip to {cur}?",),
    ),
    "health_event": SlotText(
        values=_HEALTH,
        state=("I'm recovering from {v}.", "Health update: I had {v}.", "I've been dealing with {v}."),
        change=("Bad luck, I just had {v}.", "I'm laid up with {v} this week.", "Quick update: {v}, so I'm taking it easy."),
        ask_current=("What health issue did I tell you about most recently?", "What was my latest health problem?"),
        ask_when=("When did I mention {cur}?",),
    ),
}

SMALL_TALK: tuple[str, ...] = (
    "Long day today, I'm just unwinding now.",
    "The weather has been all over the place this week.",
    "I watched a documentary about deep sea creatures last night.",
    "My friend just got back from a trip to {city} and loved it.",
    "I tried a new coffee place near the office, it was fine.",
    "Do you think it's worth learning a new language at my age?",
    "My cousin adopted a {species} and won't stop sending photos.",
    "I read an article about {hobby}, looks fun but not for me.",
    "Someone at the gym was talking about {food} all morning.",
    "I'm thinking about repainting the kitchen.",
    "Traffic was terrible on the way home.",
    "My neighbour plays {music} really loudly on Sundays.",
    "I keep forgetting to water the plants.",
    "There was a street festival downtown today.",
    "I need to renew my passport at some point.",
    "A colleague recommended a podcast about history.",
    "I slept badly, too much coffee probably.",
    "My sister is visiting {city} next month for work.",
    "I might sign up for a half marathon, not sure yet.",
    "The new season of that detective show is out.",
    "I cleaned out the garage this weekend, so much junk.",
    "I saw a poster for a {music} concert but it's sold out.",
    "Work has been quiet this week, which is nice.",
    "I'm trying to drink more water.",
)

ASSISTANT_REPLIES: tuple[str, ...] = (
    "That sounds great, tell me more!",
    "Thanks for sharing that with me.",
    "Noted. How are you feeling about it?",
    "Interesting! Anything else on your mind today?",
    "I hear you. Is there anything I can help with?",
    "Good to know. What's next for you this week?",
    "That's quite something. How did it go?",
    "Understood. Let me know if you want ideas.",
)

BOOK_REQUESTS: tuple[str, ...] = (
    "Can you recommend a good book for the weekend?",
    "I need something new to read, any suggestion?",
    "What novel would you suggest for a long flight?",
)
BOOK_RECOMMENDATIONS: tuple[str, ...] = (
    "You might enjoy {v}; it's a wonderful read.",
    "I'd suggest {v}, I think it will suit you.",
    "Try {v}, it's one of my top picks.",
)
ASK_RECOMMENDATION: tuple[str, ...] = (
    "Which book did you recommend to me last time?",
    "What was the last book you suggested I read?",
)
