"""Rules that read facts in what people say: one rule per way people state a fact, in
English and Chinese, each naming the slot it fills ("home city", "team lead", "饮食") so a
newer value retires the older one. The offline extractor reads turns with them
(extraction/offline.py); a model's answers are mended with them (extraction/amend.py: a
slot for a fact without a key, the value the user just said); recall finds the turns not
yet extracted that tell the slot a question asks about (recall/pending.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memoryd.models.tables import Category


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    template: str  # formatted with the captured group `x`
    category: Category
    name: str  # the slot: a new fact with the same name replaces the old one
    confidence: float
    temporary: str = "no"


def rx(regex: str) -> re.Pattern[str]:
    return re.compile(regex, re.IGNORECASE)


# A captured value ends at sentence punctuation, a joining word or a time phrase, so
# "I live in Berlin and I prefer tea" and "I moved to Lisbon last week" stay clean.
_END = (
    r"(?P<x>[^.!?。！？\n]{2,200}?)"
    r"(?=\s+(?:and|but|because|so|last|this|next|since|yesterday|today|tomorrow)\b"
    r"|[.!?。！？;\n]|$)"
)

# A place ends at a comma too: "relocated to Lisbon, boxes everywhere".
_PLACE_END = _END.replace("|[.!?。！？;\\n]", "|[,，.!?。！？;\\n]")

# An employer is named with a capital ("Acme", "Globex Labs"), which "at home" is not.
_COMPANY = (
    r"(?-i:(?P<x>[A-Z][\w&.\-]*(?: [A-Z][\w&.\-]*){0,3}))"
    r"(?=\s+(?:as|and|but|since|last|this|next|yesterday|today|for|on|in)\b|[,.!?;\n]|$)"
)

# "split up" as a couple, not "split up the bill": the phrase ends the clause, or a time
# phrase follows.
_UP_ENDS = (
    r"(?=\s*(?:[.,;!?…]|$)|\s+(?:in|last|this|on|after|before|recently|yesterday|a few|"
    r"two|three|months?|weeks?)\b)"
)

# Capitalised words that start a sentence but name nothing: "Where is my favourite
# mug?", "She is my favourite teacher", "Honestly…".
_NOT_A_NAME = (
    r"(?:This|That|It|Which|What|Who|Whose|Where|How|When|Why|Here|There|She|He|They|We|"
    r"You|Everything|Nothing|Today|Tonight|Tomorrow|Yesterday|Mine|But|And|So|Honestly|"
    r"Also|Well|Yes|No|Oh|Actually)\b"
)

# How allergic: the words that may stand before "allergic", none of them a "not".
_DEGREE = r"(?:also|very|severely|mildly|really|quite|badly|deathly|seriously|so)"

# A person's name, capitalised whatever the pattern's case ("Jürgen Bauer", "Priya").
PERSON = r"(?-i:(?P<x>[A-Z][\w'\-]+(?: [A-Z][\w'\-]+)?))"

# "Remember that …": what follows, as said.
REQUESTS: list[Rule] = [
    Rule(rx(r"\b(?:please )?remember(?: that|:)?\s+" + _END), "{x}", Category.USER, "", 0.95),
    Rule(rx(r"(?:请)?记住[:：,，]?\s*" + _END), "{x}", Category.USER, "", 0.95),
]

RULES: list[Rule] = [
    *REQUESTS,
    Rule(
        rx(r"\bcall me\s+(?P<x>[\w\- ]{1,40}?)(?=[.!?,]|$)"),
        "Wants to be called {x}",
        Category.USER,
        "preferred name",
        0.95,
    ),
    Rule(
        rx(r"\bI(?: am going|'m going| go) by " + PERSON),
        "Wants to be called {x}",
        Category.USER,
        "preferred name",
        0.95,
    ),
    Rule(
        rx(r"\bmy name is\s+(?P<x>[\w\- ]{1,40}?)(?=[.!?,]|$)"),
        "Name is {x}",
        Category.USER,
        "name",
        0.9,
    ),
    Rule(
        rx(r"叫我(?P<x>[^，。！？,.!?\s]{1,20}?)(?=就行|就好|吧|[，。！？,.!?\s]|$)"),
        "希望被称为{x}",
        Category.USER,
        "preferred name",
        0.95,
    ),
    Rule(
        rx(
            r"\b(?:I|we)(?:'ve| have)?(?:\s+(?:finally|just|recently|now))?\s+"
            r"(?:live|moved|relocated|settled) (?:in|to)\s+" + _PLACE_END
        ),
        "Lives in {x}",
        Category.USER,
        "home city",
        0.9,
    ),
    Rule(
        rx(
            r"我(?:们家?)?(?:现在)?(?:住在|住(?![得的了过着处院宿一两几半酒宾民])|搬到了?|搬去了?)"
            r"(?P<x>[^，。！？,.!?\s]{1,30}?)(?:了|[，。！？,.!?\s]|$)"
        ),
        "住在{x}",
        Category.USER,
        "home city",
        0.9,
    ),
    # "在深圳住了快一个月了": a stay of months is where one lives, a night is not.
    Rule(
        rx(
            r"(?<!出差)(?<!旅游)在(?!酒店|宾馆|医院|民宿|朋友家|亲戚家)(?P<x>[\u4e00-\u9fff]{2,4}?)"
            r"住了(?:快|将近|差不多|有)?"
            r"(?:一|两|三|半|几|好几|\d+)?(?:个多?月|年)"
        ),
        "住在{x}",
        Category.USER,
        "home city",
        0.9,
    ),
    Rule(
        rx(
            r"(?:\bI (?:now )?work at|(?:\bI(?:'ve| have)? |^|[.!?]\s+)(?:just |recently )?"
            r"started (?:a new job )?at|\bI(?:'m| am) (?:now )?an? [\w\- ]{2,40}? at)\s+" + _COMPANY
        ),
        "Works at {x}",
        Category.USER,
        "employer",
        0.9,
    ),
    Rule(
        # "Switched jobs, I'm at Roche now": the change of job tells an employer from a
        # place one is at ("I'm at Starbucks now").
        rx(
            r"\b(?:switched|changed jobs?|new job|joined)\b[^.!?]{0,40}?"
            r"\bI(?:'m| am) (?:now )?at\s+"
            r"(?-i:(?P<x>[A-Z][\w&.\-]*(?: [A-Z][\w&.\-]*){0,3}))\s+now\b"
        ),
        "Works at {x}",
        Category.USER,
        "employer",
        0.9,
    ),
    Rule(
        rx(
            r"(?:\b(?:our|my) (?:new |interim |permanent )?(?:team )?lead(?:er)? is (?:now )?"
            r"|\bhired a (?:new |permanent )?(?:team )?lead(?:er)?:\s*)" + PERSON
        ),
        "Team lead is {x}",
        Category.USER,
        "team lead",
        0.9,
    ),
    Rule(
        rx(PERSON + r" (?:is|has been) (?:now )?(?:leading|running|heading) (?:our|my|the) team"),
        "Team lead is {x}",
        Category.USER,
        "team lead",
        0.9,
    ),
    Rule(
        rx(
            PERSON + r" is (?:now )?(?:our|my) (?:new |interim |permanent )?(?:team )?lead(?:er)?\b"
        ),
        "Team lead is {x}",
        Category.USER,
        "team lead",
        0.9,
    ),
    Rule(
        rx(r"组长(?:是|换成了?|变成了?)(?P<x>[^，。！？,.!?\s了]{2,4})"),
        "组长是{x}",
        Category.USER,
        "组长",
        0.9,
    ),
    Rule(
        rx(
            r"(?:\bmy (?:new )?(?:boyfriend|girlfriend|partner|husband|wife|fianc[ée]e?),? "
            r"|\bseeing someone(?: new)?(?:, (?:her|his|their) name is |[!.,]+\s*(?:I )?met )"
            r"|\bI(?:'m| am) (?:now )?(?:seeing|dating) )" + PERSON
        ),
        "Partner is {x}",
        Category.USER,
        "partner",
        0.9,
    ),
    # The end of a relationship, or none, is the partner slot's value too: a new partner
    # retires "Broke up with Marco" as it would "Partner is Marco".
    Rule(
        rx(
            r"\bI(?:'ve| have)? (?:just |finally |recently )?"
            r"(?:broke up with|split up with|separated from|divorced) " + PERSON
        ),
        "Broke up with {x}",
        Category.USER,
        "partner",
        0.9,
    ),
    Rule(
        rx(PERSON + r" and I (?:have )?(?:broke|broken|split) up" + _UP_ENDS),
        "Broke up with {x}",
        Category.USER,
        "partner",
        0.9,
    ),
    Rule(
        rx(r"\bI(?:'m| am) (?:now |still |happily )?(?P<x>single)(?![\w-])(?!\s+minded)"),
        "Relationship status: {x}",
        Category.USER,
        "partner",
        0.9,
    ),
    Rule(
        rx(r"(?:男|女)朋友(?P<x>[\u4e00-\u9fff]{2,3}?)(?=在一起|和我)"),
        "伴侣是{x}",
        Category.USER,
        "伴侣",
        0.9,
    ),
    Rule(
        rx(
            r"(?<![们妈爸姐哥弟妹])(?:和|跟)(?!平)(?:前?男朋友|前?女朋友|前男友|前女友|老公|老婆)?"
            r"(?P<x>(?:(?![你我他她说])[\u4e00-\u9fff]){1,3}?)分手"
        ),
        "和{x}分手了",
        Category.USER,
        "伴侣",
        0.9,
    ),
    Rule(
        rx(r"我(?:现在|目前|还是|一直)?(?:是)?(?P<x>单身)(?!的时候|那|时|过)"),
        "感情状况：{x}",
        Category.USER,
        "伴侣",
        0.9,
    ),
    Rule(
        rx(
            r"(?:男|女)朋友(?:了)?[，,]?\s*(?:叫|是)(?P<x>[^，。！？,.!?\s]{2,3}?)(?=[，。！？,.!?\s]|是|$)"
        ),
        "伴侣是{x}",
        Category.USER,
        "伴侣",
        0.9,
    ),
    Rule(
        rx(r"\bI(?:'m| am) (?:now |still )?(?:a )?(?P<x>vegan|vegetarian|pescatarian)\b"),
        "Diet is {x}",
        Category.USER,
        "diet",
        0.9,
    ),
    Rule(
        rx(r"\bI(?:'m| am) (?:now )?(?:on|doing|following) (?:a |the )?(?P<x>[\w\-]+) diet\b"),
        "Diet is {x}",
        Category.USER,
        "diet",
        0.9,
    ),
    # Allergies are many: each is kept, none retires another. The user's own, said as
    # such: "I'm (vegan and) (severely) allergic to", never "I'm not", "my son is".
    Rule(
        rx(r"\bI(?:'m| am) (?:[\w-]+ and )?(?:" + _DEGREE + r" )*allergic to\s+" + _END),
        "Allergic to {x}",
        Category.USER,
        "",
        0.9,
    ),
    Rule(rx(r"我对(?P<x>[^，。！？,.!?\s不没]{1,12}?)过敏"), "对{x}过敏", Category.USER, "", 0.9),
    Rule(
        rx(r"(?:在搞|改成了?|换成了?|开始|在吃|坚持)(?P<x>[^，。！？,.!?\s]{2,6}?)饮食"),
        "饮食方式是{x}饮食",
        Category.USER,
        "饮食",
        0.9,
    ),
    Rule(
        rx(r"\bI (?:really )?(?:prefer|like|love)\s+" + _END), "Prefers {x}", Category.USER, "", 0.9
    ),
    Rule(
        rx(r"\bI (?:don't|do not|never) (?:like|want)\s+" + _END),
        "Dislikes {x}",
        Category.USER,
        "",
        0.9,
    ),
    Rule(
        rx(r"我(?:更|很|最)?(?:喜欢|偏好|爱)(?P<x>[^，。！？,.!?\n]{1,60})"),
        "喜欢{x}",
        Category.USER,
        "",
        0.9,
    ),
    Rule(rx(r"我不喜欢(?P<x>[^，。！？,.!?\n]{1,60})"), "不喜欢{x}", Category.USER, "", 0.9),
    Rule(
        rx(r"(?:^|[.!?]\s+)(?:please\s+)?(?:don't|do not|never)\s+(?P<x>[^.!?\n]{3,200})"),
        "Do not {x}",
        Category.FEEDBACK,
        "",
        0.85,
    ),
    Rule(rx(r"(?:请)?不要(?P<x>[^，。！？,.!?\n]{2,60})"), "不要{x}", Category.FEEDBACK, "", 0.85),
    Rule(
        rx(r"\bmy favou?rite (?P<slot>[\w ]{2,30}?) is\s+" + _END),
        "Favourite {slot} is {x}",
        Category.USER,
        "favourite {slot}",
        0.9,
    ),
    # The other way round: "Radiohead is my favourite band btw".
    Rule(
        rx(
            r"(?<![\w'])(?-i:(?P<x>(?!" + _NOT_A_NAME + r")[A-Z][\w'&\-]*"
            r"(?: [A-Z][\w'&\-]*){0,3})) is my (?:all-time )?favou?rite "
            r"(?P<slot>[\w ]{2,30}?)(?=[,.!;]|\s+(?:btw|by the way|ever|of all time)\b|$)"
        ),
        "Favourite {slot} is {x}",
        Category.USER,
        "favourite {slot}",
        0.9,
    ),
    # Any other "my X is Y": less certain, so it lands in the short tier.
    Rule(
        rx(r"\bmy (?!name\b|favou?rite\b)(?P<slot>[\w' ]{2,30}?) is\s+" + _END),
        "My {slot} is {x}",
        Category.USER,
        "{slot}",
        0.75,
    ),
    Rule(rx(r"(?P<x>https?://[^\s<>\"'）)]+)"), "Shared link: {x}", Category.REFERENCE, "", 0.7),
]


def _statement(template: str) -> re.Pattern[str]:
    """What a rule's template writes, as a pattern with its slot captured."""
    parts = re.split(r"(\{x\}|\{slot\})", template)
    pieces = {"{x}": ".+", "{slot}": r"(?P<slot>[\w' ]{2,30}?)"}
    return re.compile("".join(pieces.get(p, re.escape(p)) for p in parts), re.IGNORECASE)


# The rules that name a slot, with a template that is more than its value.
_STATEMENTS = [(_statement(r.template), r) for r in RULES if r.name and r.template != "{x}"]


def slot_of_statement(content: str) -> Rule | None:
    """The rule whose template wrote `content` ("Lives in Porto": home city), with its
    name filled ("My gym is X": gym); a model's fact without a key gets the slot."""
    for pattern, rule in _STATEMENTS:
        match = pattern.fullmatch(content.strip().rstrip(".。"))
        if match:
            slot = match.groupdict().get("slot") or ""
            return Rule(
                rule.pattern,
                rule.template,
                rule.category,
                rule.name.format(slot=slot),
                rule.confidence,
                rule.temporary,
            )
    return None


def slots_told(text: str) -> set[str]:
    """The names of the slots whose value the rules read in `text` ("I just moved to
    Porto": "home city")."""
    return {
        rule.name.format(**{k: v for k, v in match.groupdict().items() if v})
        for rule in RULES
        if rule.name
        for match in rule.pattern.finditer(text)
    }
