"""French typography of a translation the model wrote.

    joined_elisions("l' Union et qu' il")   ->  "l'Union et qu'il"

Europarl's French, the bulk of the training data, writes a space after an elided word in about one elision in
thirteen ("l' Union", "qu' il"); the models learned it and write it in news too. French writes none.
"""

from __future__ import annotations

import re

# An elided word (l', d', qu', jusqu', ...) and the spaces after it, before a letter; not a letter quoted
# ("la lettre 'l' est"): the elided word starts a word
ELIDED_THEN_SPACE = re.compile(
    r"(?<![\w'\u2019])((?:[cdjlmnst]|qu|jusqu|lorsqu|puisqu|quoiqu|presqu|aujourd)['\u2019]) +(?=[^\W\d_])",
    re.IGNORECASE)


def joined_elisions(text: str) -> str:
    """`text` without the spaces after its elided words."""
    return ELIDED_THEN_SPACE.sub(r"\1", text)
