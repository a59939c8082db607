"""Web pages: `nmt translate -i page.html` translates the text of each block and keeps the markup
(nmt.apps.webpages)."""

import re
import subprocess
import sys
from pathlib import Path

from nmt.apps.webpages import translate_html

GARDEN = Path(__file__).parent / "files" / "garden.html"


def test_a_page_with_nothing_to_translate_comes_back_byte_for_byte():
    page = GARDEN.read_text(encoding="utf-8")
    assert translate_html(page, lambda texts: texts, lambda source, target: []) == page
    odd = ("<P CLASS='x'>Fish &amp; chips&#33;<BR/>More <I>text</I></P><!-- note -->\r\n<p>a<b>b</b>c</p>\r"
           "<p>line\u2028separator</p>\n<p>last</p>")
    assert translate_html(odd, lambda texts: texts, lambda source, target: []) == odd
    upper = translate_html(odd, lambda texts: [text.upper() for text in texts], lambda source, target: [])
    assert upper.endswith("<p>LAST</p>") and "<p>LINE SEPARATOR</p>" in upper  # offsets right after \r, \u2028


def test_inline_elements_go_around_the_words_aligned_with_theirs():
    def upper(texts):
        return [text.upper() for text in texts]

    def reversed_words(texts):
        return [" ".join(reversed(text.split())) for text in texts]

    def mirror(source, target):
        n = len(source.split())
        return [(i, n - 1 - i) for i in range(n)]

    page = '<p>Open the <a href="/d">old door</a>. Then <b>run</b>!</p>'
    assert translate_html(page, upper, lambda s, t: [(i, i) for i in range(len(s.split()))]) == \
        '<p>OPEN THE <a href="/d">OLD DOOR</a>. THEN <b>RUN</b>!</p>'  # the stop stays outside the link
    # the words in another order: each tag follows its words
    assert translate_html("<p>one <b>two</b> three</p>", reversed_words, mirror) == "<p>three <b>two</b> one</p>"
    # nothing aligned: the tag stays, around the word where its own stood
    assert translate_html("<p><i>Hello</i> there</p>", upper, lambda s, t: []) == "<p><i>HELLO</i> THERE</p>"


def test_nmt_translate_writes_the_page_in_french_with_its_markup_kept(tmp_path):
    out = tmp_path / "garden.fr.html"
    done = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "-i", str(GARDEN), "-o", str(out), "-q"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    english, french = GARDEN.read_text(), out.read_text()

    def tags(page):
        return re.findall(r"<[^>]+>", page)

    assert tags(french) == tags(english)  # every tag, attribute and comment, in order
    for kept in ("<pre>do_not_translate = True</pre>", '<p class="notranslate">Keep this sentence.</p>',
                 '<script>var message = "A dog runs.";</script>', "<style>p { color: #333; }</style>"):
        assert kept in french
    assert "<h1>Our small garden</h1>" not in french and "&amp;" in french
    assert re.search(r"<b>\w+</b>", french) and re.search(r'<a href="/door.html" title="Door">[^<]+</a>', french)
