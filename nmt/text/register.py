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
