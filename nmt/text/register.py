"""The register of French text: formal (vous) or informal (tu), for formality control.

    register_of("Oublie ton mot de passe ?")         ->  "informal"
    register_of("Veuillez vous connecter à nouveau.") ->  "formal"
    register_of("Le fichier est introuvable.")       ->  None   (no second person)
    register_of("Tu sais ce que vous voulez.")        ->  "mixed"

English has one "you"; French chooses: tu, te, toi, ton, ta, tes to one person one knows, vous, votre, vos to
several people or to one person politely, and the verb agrees ("Cliquez", "Regarde"). Interfaces and business
text say vous. A second-person verb without its pronoun is caught where it ends in -ez (the imperative of vous:
"Cliquez sur OK"); the informal imperative ("Regarde !") has no ending of its own and goes unseen.

nmt.data.register tags training pairs with the register of their French side; `nmt translate --formality`
asks the model for one.
"""

from __future__ import annotations

import re

FORMAL, INFORMAL, MIXED = "formal", "informal", "mixed"
FORMALITIES = ("formal", "informal", "auto")  # what a user asks for; auto: the model's own choice

# A pronoun alone or after a hyphen (Assieds-toi, Avez-vous), not "-t-" (a-t-il), the noun "ton" (le ton) or
# "tou(te)s"
INFORMAL_WORDS = re.compile(r"(?<![\w'’(])(?:(?:tu|te|toi|ta|tes|(?<!le )(?<!un )(?<!du )(?<!au )(?<!ce )"
                            r"(?<!son )(?<!mon )ton)"
                            r"(?![\w'’])|t['’](?=[^\W\d_]))", re.IGNORECASE)
FORMAL_WORDS = re.compile(r"(?<![\w'’])(?<!rendez-)(?:vous|votre|vos|vôtres?)(?![\w'’])", re.IGNORECASE)
# A verb in -ez (vous cliquez, Cliquez !), lowercase or opening a sentence; not the few other words in -ez, nor a
# name (Perez, Suez)
EZ_WORD = re.compile(r"(?<![\w'’-])[^\W\d_]{2,}ez(?![\w'’])")
NOT_VERBS = {"chez", "assez", "nez", "rez", "lez", "rendez", "suez", "alvarez", "benitez", "chavez", "diez",
             "dominguez", "enriquez", "fernandez", "gomez", "gonzalez", "gutierrez", "hernandez", "jimenez", "juarez",
             "lopez", "marquez", "martinez", "mendez", "menendez", "nunez", "ortez", "perez", "ramirez", "rodriguez",
             "sanchez", "suarez", "valdez", "vasquez", "vazquez", "velazquez"}


def register_of(french: str) -> str | None:
    """FORMAL, INFORMAL or MIXED (both in one text), or None where the text addresses no one."""
    informal = bool(INFORMAL_WORDS.search(french))
    formal = bool(FORMAL_WORDS.search(french)) or any(_is_ez_verb(french, match) for match in EZ_WORD.finditer(french))
    if informal and formal:
        return MIXED
    return INFORMAL if informal else FORMAL if formal else None


def _is_ez_verb(text: str, match: re.Match) -> bool:
    word = match.group()
    if word.lower() in NOT_VERBS or not word[1:].islower():
        return False
    opens = not text[:match.start()].strip() or text[:match.start()].rstrip()[-1] in ".!?:;«\"("
    return word[0].islower() or opens


# ---- the informal imperative --------------------------------------------------------------------------------

# Asked for tu, the model still writes most interface imperatives in the vous form ("Sélectionnez l'extension que tu
# veux supprimer": 12 of 200 probe lines mixed both at round 3's update 10,143), as nearly all interface strings it
# learnt from do. informal_imperatives writes them as tu's imperative. Irregular verbs by ending (a prefixed verb
# conjugates as its root: reprenez, obtenez, rejoignez); -dre verbs and the -isser verbs of the first group by name.
IRREGULAR_WORDS = {
    "allez": "va", "ayez": "aie", "soyez": "sois", "sachez": "sache", "voyez": "vois", "revoyez": "revois",
    "prévoyez": "prévois", "croyez": "crois", "faites": "fais", "refaites": "refais", "dites": "dis", "lisez": "lis",
    "relisez": "relis", "élisez": "élis", "riez": "ris", "souriez": "souris", "servez": "sers", "partez": "pars",
    "repartez": "repars", "sortez": "sors", "ressortez": "ressors", "dormez": "dors", "endormez": "endors",
}
IRREGULAR_ENDINGS = {
    "prenez": "prends", "venez": "viens", "tenez": "tiens", "mettez": "mets", "crivez": "cris", "duisez": "duis",
    "truisez": "truis", "suivez": "suis", "vivez": "vis", "battez": "bats", "cevez": "çois", "buvez": "bois",
    "ouvrez": "ouvre", "offrez": "offre", "couvrez": "couvre", "courez": "cours", "oignez": "oins", "eignez": "eins",
    "aignez": "ains", "naissez": "nais", "araissez": "arais", "fuyez": "fuis", "tendez": "tends", "vendez": "vends",
    "cendez": "cends", "fendez": "fends", "pendez": "pends", "répondez": "réponds", "correspondez": "corresponds",
    "perdez": "perds", "mordez": "mords", "tordez": "tords", "cousez": "couds", "rompez": "romps", "cluez": "clus",
    "plaisez": "plais", "taisez": "tais", "mourez": "meurs", "quérez": "quiers",
}
ENDINGS_LONGEST_FIRST = sorted(IRREGULAR_ENDINGS, key=len, reverse=True)
FIRST_GROUP_ISSER = {"glissez", "vissez", "dévissez", "hissez", "plissez", "déplissez", "tissez", "coulissez",
                     "esquissez", "pissez"}
IMPERATIVE = re.compile(r"(?<![\w'’-])([^\W\d_]{2,}ez|(?<![^\s«\"(])(?:Faites|Refaites|Dites))"
                        r"(-(?:vous|toi|le|la|les|moi|nous|en|y|lui|leur)"
                        r"(?![\w'’]))?(-(?:en|y|le|la|les|moi|lui|leur)(?![\w'’]))?(?![\w'’])")
SUBJECT_BEFORE = re.compile(r"(?:\bvous|\bqui)(?:\s+(?:ne|n['’]|le|la|les|l['’]|lui|leur|en|y|me|m['’]|nous|se|s['’]))*"
                            r"\s*$", re.IGNORECASE)


def tu_imperative(verb: str) -> str | None:
    """The tu imperative of a vous imperative ("Cliquez" -> "Clique", "Choisissez" -> "Choisis"), in its case;
    None where it is not a verb this knows."""
    lower = verb.lower()
    if lower in NOT_VERBS or lower in ("veuillez", "pouvez", "voulez", "devez", "savez") or not lower[1:].islower():
        return None
    ending = next((e for e in ENDINGS_LONGEST_FIRST if lower.endswith(e)), None)
    if lower in IRREGULAR_WORDS:
        form = IRREGULAR_WORDS[lower]
    elif ending is not None:
        form = lower[: -len(ending)] + IRREGULAR_ENDINGS[ending]
    elif re.search(r"[^\W\daeiouyéèêàâîôû]issez$", lower) and lower not in FIRST_GROUP_ISSER:  # not laissez
        form = lower[:-5] + "is"
    elif lower.endswith("ez"):
        form = first_group_imperative(lower[:-2])
    else:
        return None
    return form[0].upper() + form[1:] if verb[0].isupper() else form


def first_group_imperative(stem: str) -> str:
    """A first-group verb's tu imperative from its vous stem: essay -> essaie, répét -> répète, lev -> lève,
    appel -> appelle, cliqu -> clique."""
    if re.search(r"[aou]y$", stem):
        return stem[:-1] + "ie"
    if match := re.search(r"é([^\W\daeiouyéèêàâîôû]{1,2})$", stem):  # the last vowel: é before its consonants
        return stem[: match.start()] + "è" + match.group(1) + "e"
    if re.search(r"(?:appel|jet)$", stem):
        return stem + stem[-1] + "e"
    if match := re.search(r"(?<=[^\W\daeiouyéèêàâîôû])e([lmnrstv])$", stem):
        return stem[: match.start()] + "è" + match.group(1) + "e"
    return stem + "e"


def informal_imperatives(french: str) -> str:
    """`french` with its vous imperatives as tu's ("Sélectionnez l'extension que tu veux" -> "Sélectionne
    l'extension que tu veux", "Connectez-vous" -> "Connecte-toi"), and "Veuillez" as "Merci de": for a
    translation asked in the informal register. A verb after its subject vous ("si vous voulez") or asking a
    question ("Voulez-vous ... ?") is left as it is; so is a translation that this would make mix both registers
    where it did not: one without tu that keeps a vous, votre or vos ("Si vous voulez, cliquez ici.")."""
    written = _informal_imperatives(french)
    if not INFORMAL_WORDS.search(french) and FORMAL_WORDS.search(written):
        return french
    return written


def _informal_imperatives(french: str) -> str:
    def informal(match: re.Match) -> str:
        verb, attached, second = match.group(1), match.group(2) or "", match.group(3) or ""
        if SUBJECT_BEFORE.search(french[: match.start()]):
            return match.group()
        rest = french[match.end():]
        if attached == "-vous" and re.match(r"[^.!:;]*\?", rest):  # an inverted question: Voulez-vous ... ?
            return match.group()
        form = tu_imperative(verb)
        if form is None:
            return match.group()
        if attached == "-vous":
            attached = "-t'en" if second == "-en" else "-toi"
            second = "" if second == "-en" else second
        elif attached in ("-en", "-y") and form.endswith(("e", "a")):
            form += "s"  # Parles-en, Vas-y
        return form + attached + second

    french = IMPERATIVE.sub(informal, french)
    french = re.sub(r"\b([Vv])euillez\b", lambda m: "Merci de" if m.group(1) == "V" else "merci de", french)
    french = re.sub(r"\b([Mm]erci de) vous (?=\w)", r"\1 te ", french)  # Veuillez vous connecter
    return re.sub(r"\b([Mm]erci d|[Mm]erci de t)e (?=[aeiouyhàâéèêîôû])", r"\1'", french, flags=re.IGNORECASE)


# ---- the formal imperative ----------------------------------------------------------------------------------

# Asked for vous, the model at times writes a tu imperative with its pronoun attached ("Log in to continue." ->
# "Contente-toi de continuer.", "Join us" -> "Joigne-nous"): a verb form the hyphen and pronoun mark as one.
# Written as vous's where this knows the verb (the tu form of the vous form it finds is the one written, and no
# other vous form gives it: "Lève" could be levez or lévez, and stays).
ATTACHED = re.compile(r"(?<![\w'’-])([^\W\d_]{2,})-(toi|t['’]en|nous|moi|le|la|les|lui|leur|en|y)"
                      r"(-(?:moi|lui|leur|nous|en|y))?(?![\w'’-])")
VOUS_WORDS = {tu: vous for vous, tu in IRREGULAR_WORDS.items()}


def vous_imperative(verb: str) -> str | None:
    """The vous imperative of a tu imperative ("Contente" -> "Contentez", "Choisis" -> "Choisissez", "Dis" ->
    "Dites", "Vas" (before -y) -> "Allez"), in its case: tu_imperative's rules the other way, in its order, each
    form checked by going back; None where it is not a verb this knows or two vous forms would give it."""
    lower = verb.lower()
    if not lower[1:].islower() or lower.endswith(("ez", "ons", "mes")) or lower in NOT_VERBS | set(IRREGULAR_WORDS):
        return None
    forms = (lower, lower[:-1]) if lower.endswith(("es", "as")) else (lower,)  # Parles-en, Vas-y
    for form in forms:
        stem = form[:-1]
        rules = ({VOUS_WORDS[form]} if form in VOUS_WORDS else set(),
                 {form[: -len(tu)] + vous for vous, tu in IRREGULAR_ENDINGS.items() if form.endswith(tu)},
                 {form[:-2] + "issez"} if form.endswith("is") else set(),
                 set() if not form.endswith("e") else
                 {stem[:-1] + "yez"} if re.search(r"[aou]i$", stem) else
                 {stem[:-1] + "ez"} if re.search(r"(?:appel|jet)[lt]$", stem) else
                 {stem.replace("è", "e") + "ez", stem.replace("è", "é") + "ez"})
        for candidates in rules:
            found = {c for c in candidates if len(c) > 3 and tu_imperative(c) == form}
            if len(found) > 1:
                return None
            if found:
                vous = found.pop()
                return vous[0].upper() + vous[1:] if verb[0].isupper() else vous
    return None


def formal_imperatives(french: str) -> str:
    """`french` with its tu imperatives that carry a pronoun as vous's ("Contente-toi de continuer." ->
    "Contentez-vous de continuer.", "Appelle-nous" -> "Appelez-nous", "Dis-moi" -> "Dites-moi"): for a
    translation asked in the formal register. A translation this would leave mixing both registers (a tu, ton or
    tes elsewhere) stays as it is."""

    def formal(match: re.Match) -> str:
        form = vous_imperative(match.group(1))
        if form is None:
            return match.group()
        pronoun = {"toi": "vous"}.get(match.group(2), match.group(2))
        pronoun = "vous-en" if re.fullmatch(r"t['’]en", pronoun) else pronoun
        return f"{form}-{pronoun}{match.group(3) or ''}"

    written = ATTACHED.sub(formal, french)
    return french if INFORMAL_WORDS.search(written) else written
