"""Web pages: `nmt translate -i page.html` translates the text of each block and keeps the markup
(nmt.apps.webpages)."""

import re
import subprocess
import sys
from pathlib import Path

from nmt.apps.webpages import Markup, translate_html

GARDEN = Path(__file__).parent / "files" / "garden.html"
RUSTDOC = Path(__file__).parent / "files" / "rustdoc.html"  # a page as mdBook writes it (tests/files/README.md)


def tags(page):
    return re.findall(r"<[^>]+>", page)


def tag_names(page):
    return re.findall(r"<(/?[\w!-]+)", page)


def upper(texts):
    return [text.upper() for text in texts]


def same_order(source, target):
    return [(i, i) for i in range(len(source.split()))]


def test_a_page_with_nothing_to_translate_comes_back_byte_for_byte():
    page = GARDEN.read_text(encoding="utf-8")
    assert translate_html(page, lambda texts: texts, lambda source, target: []) == page
    odd = ("<P CLASS='x'>Fish &amp; chips&#33;<BR/>More <I>text</I></P><!-- note -->\r\n<p>a<b>b</b>c</p>\r"
           "<p>line\u2028separator</p>\n<p>last</p>")
    assert translate_html(odd, lambda texts: texts, lambda source, target: []) == odd
    upper = translate_html(odd, lambda texts: [text.upper() for text in texts], lambda source, target: [])
    assert upper.endswith("<p>LAST</p>") and "<p>LINE SEPARATOR</p>" in upper  # offsets right after \r, \u2028


def test_inline_elements_go_around_the_words_aligned_with_theirs():
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


def test_xml_s_empty_elements_glued_to_words_are_tags_around_them_and_ignored_ones_stay_placeholders():
    """DeepL's tag_handling=xml with ignore_tags=x, as Weblate sends a string: `<x id="6"></x>all<x id="14"></x>`
    stands for the tags around "all", whose words are translated; `<x id="7"></x>` alone stands for a format."""
    seen = []

    def model(texts):
        seen.extend(texts)
        return upper(texts)

    weblate = Markup(xml=True, kept=frozenset({"x"}))
    page = 'Click <x id="6"></x>all<x id="14"></x> files, <x id="20"/> of them.'
    assert translate_html(page, model, same_order, weblate) == \
        'CLICK <x id="6"></x>ALL<x id="14"></x> FILES, <x id="20"/> OF THEM.'
    assert seen == ["Click all files, \u29851\u2986 of them."]  # the tag markers out of the text, the format in it
    xliff = '<g id="1">Save</g> the file<x id="2"/>'  # no element known: each inside the sentence
    assert translate_html(xliff, upper, same_order, Markup(xml=True)) == '<g id="1">SAVE</g> THE FILE<x id="2"/>'


def test_nmt_translate_writes_the_page_in_french_with_its_markup_kept(tmp_path):
    out = tmp_path / "garden.fr.html"
    done = subprocess.run([sys.executable, "-m", "nmt_cli.main", "translate", "-i", str(GARDEN), "-o", str(out), "-q"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    english, french = GARDEN.read_text(), out.read_text()
    assert tag_names(french) == tag_names(english)  # every tag and comment, in order
    assert [tag for tag in tags(french) if "title=" not in tag and "<html" not in tag] == \
        [tag for tag in tags(english) if "title=" not in tag and "<html" not in tag]  # and the other attributes
    assert '<html lang="fr">' in french and 'title="Door"' not in french  # a link's title is read: translated
    for kept in ("<pre>do_not_translate = True</pre>", '<p class="notranslate">Keep this sentence.</p>',
                 '<script>var message = "A dog runs.";</script>', "<style>p { color: #333; }</style>"):
        assert kept in french
    assert "<h1>Our small garden</h1>" not in french
    assert not re.search(r"&(?!\w+;|#\d+;)", french)  # an ampersand the model kept comes back escaped
    assert re.search(r"<b>\w+</b>", french) and re.search(r'<a href="/door.html" title="[^"]+">[^<]+</a>', french)


def test_a_real_page_keeps_every_tag_and_its_code_inside_the_sentences():
    page = RUSTDOC.read_text(encoding="utf-8")
    assert translate_html(page, lambda texts: texts, lambda source, target: []) == page
    sent = []
    french = translate_html(page, lambda texts: sent.extend(texts) or upper(texts), same_order)
    assert tag_names(french) == tag_names(page)
    for attribute in ('<html lang="fr" class="light sidebar-visible" dir="ltr">', 'aria-label="TABLE OF CONTENTS"',
                      'placeholder="SEARCH THIS BOOK ..."', 'title="SEARCH (`/`)"', 'aria-keyshortcuts="/ s"'):
        assert attribute in french  # what a reader sees or hears is translated, the rest kept
    assert re.findall(r"<code>.*?</code>|<script>.*?</script>", french, re.S) == \
        re.findall(r"<code>.*?</code>|<script>.*?</script>", page, re.S)
    # inline code is a placeholder inside its sentence, not a cut through it
    assert "Let’s run ⦅1⦆ on our code. To do so, we can call it with the path to our crate root like this:" in sent
    assert "<p>LET’S RUN <code>rustdoc</code> ON OUR CODE." in french
    assert "<p>Press <kbd>S</kbd> or <kbd>/</kbd> to search in the book</p>" not in french
    assert "<p>PRESS <kbd>S</kbd> OR <kbd>/</kbd> TO SEARCH IN THE BOOK</p>" in french
    assert not any(text.startswith((".", ",", ":")) for text in sent)


def test_a_kept_element_the_model_dropped_or_repeated_comes_back_once():
    page = "<p>Run <code>make all</code> now, then rest.</p>"
    dropped = translate_html(page, lambda texts: ["Lancez maintenant, puis reposez-vous."], same_order)
    assert dropped.count("<code>make all</code>") == 1 and dropped.startswith("<p>Lancez <code>make all</code>")
    twice = "Lancez \u29851\u2986 \u29851\u2986 \u29852\u2986 puis."  # placeholder 1 twice, an unknown 2
    repeated = translate_html(page, lambda texts: [twice], same_order)
    assert repeated == "<p>Lancez <code>make all</code> puis.</p>"
    # an element alone in its block is not sent to be translated
    assert translate_html("<li><code>-o</code></li>", lambda texts: [1 / 0 for _ in texts], same_order) == \
        "<li><code>-o</code></li>"


def test_links_side_by_side_are_separate_texts_and_their_separators_stay():
    """A navigation bar is not a sentence: each link is translated alone, its words never move to another
    link, and " | " stays between them. Links inside a sentence still go with its words."""
    page = ('<nav><a href="/">Home</a> | <a href="/menu">Our menu</a> &middot; <a href="/c">Contact us</a></nav>'
            '<p>Read <a href="/x">this page</a> now.</p>')
    seen = []

    def translate(texts):
        seen.extend(texts)
        return [text.upper() for text in texts]

    out = translate_html(page, translate, lambda source, target: [(i, i) for i in range(len(source.split()))])
    assert seen == ["Home", "Our menu", "Contact us", "Read this page now."]
    assert out.startswith('<nav><a href="/">HOME</a> | <a href="/menu">OUR MENU</a> &middot; '
                          '<a href="/c">CONTACT US</a></nav>')


def test_the_attributes_a_reader_sees_are_translated_but_not_where_the_page_says_no():
    page = ('<html lang="en-GB"><head><meta name="description" content="A shop for dogs">'
            '<meta name="viewport" content="width=device-width"></head><body>'
            '<img src="dog.png" alt="A happy dog"><input type="text" placeholder=\'Your name\'>'
            '<input type=submit value=Send><input type="hidden" value="token">'
            '<p title="Hint &amp; tip">Hello <a href="/x" aria-label="Read more">world</a>.</p>'
            '<div translate="no"><img alt="Keep me"></div><span class="notranslate" title="Nope">y</span>'
            '<code title="keep code">x</code></body></html>')
    french = translate_html(page, upper, same_order)
    for translated in ('<html lang="fr">', 'content="A SHOP FOR DOGS"', 'alt="A HAPPY DOG"', "placeholder='YOUR NAME'",
                       'value="SEND"', 'title="HINT &amp; TIP"', 'aria-label="READ MORE"'):
        assert translated in french
    for kept in ('content="width=device-width"', 'value="token"', 'alt="Keep me"', 'title="Nope"',
                 'title="keep code"', 'src="dog.png"'):
        assert kept in french
    assert translate_html(page, lambda texts: texts, same_order) == page  # nothing translated: nothing changed
