import random

import pytest

from nmt.data.corpus import PairSource, ParallelText
from nmt.data.register import RegisterTags, cleaned, looks_informal_imperative, registered, tag
from nmt.text.register import FORMAL, INFORMAL, MIXED, register_of
from nmt.text.tokenizer import REGISTER_MARKS


@pytest.mark.parametrize("french, register", [
    ("Oublie ton mot de passe ?", INFORMAL),
    ("Je t'aime.", INFORMAL),
    ("Assieds-toi.", INFORMAL),
    ("Tom t’attend.", INFORMAL),
    ("Veuillez vous connecter à nouveau.", FORMAL),
    ("Avez-vous faim ?", FORMAL),
    ("Cliquez sur OK.", FORMAL),  # the imperative of vous, without its pronoun
    ("Il dit : « Entrez ».", FORMAL),
    ("Tu sais ce que vous voulez.", MIXED),
    ("Le fichier est introuvable.", None),
    ("Il est chez lui.", None),  # a word in -ez that is no verb
    ("Perez est là.", None),  # nor a name
    ("Son ton est absurde.", None),  # the noun "ton"
    ("Le village a besoin de ton aide.", INFORMAL),  # but "de ton" is mostly the possessive
    ("Un rendez-vous.", None),
    ("A-t-il fini ?", None),  # the t between two vowels
    ("Tou(te)s les fichiers", None),
])
def test_the_register_of_french_text_is_read_from_its_pronouns_and_verbs(french, register):
    assert register_of(french) == register


def test_a_register_mark_is_one_id_that_no_text_gives(tokenizer):
    formal, informal = (tokenizer.register_id(REGISTER_MARKS[r]) for r in (FORMAL, INFORMAL))
    plain = tokenizer.encode("A dog runs.")
    assert tokenizer.encode(REGISTER_MARKS[FORMAL] + "A dog runs.") == [formal] + plain
    assert tokenizer.encode_batch([REGISTER_MARKS[INFORMAL] + "A dog runs.", "A dog runs."]) == [
        [informal] + plain, plain]
    assert formal != informal
    every_byte = bytes(range(0xF8)).decode("latin-1") + "ÿ€😀\ue000"  # text holds no byte F8-FF in UTF-8
    assert not {formal, informal} & set(tokenizer.encode(every_byte))


def source_of(pairs: list[tuple[str, str]]) -> PairSource:
    text = ParallelText([s for s, _ in pairs], [t for _, t in pairs])
    return PairSource("test", lambda size: iter([text]), None)


def test_pairs_are_tagged_with_the_register_of_their_french_and_neutral_ones_at_random():
    pairs = [("Forget it.", "Oublie ça."), ("Sit down.", "Assieds-toi."), ("Sit down.", "Asseyez-vous."),
             ("The cat sleeps.", "Le chat dort."), ("You know what you want.", "Tu sais ce que vous voulez.")] * 200
    chunk = next(registered(source_of(pairs), RegisterTags()).chunks(10_000))
    marks = {mark: register for register, mark in REGISTER_MARKS.items()}
    by_pair: dict[tuple[str, str], list] = {}
    for english, french in zip(chunk.source, chunk.target, strict=True):
        by_pair.setdefault((english.lstrip("".join(marks)), french), []).append(marks.get(english[:1]))
    assert set(by_pair[("Sit down.", "Assieds-toi.")]) == {INFORMAL, None}
    assert set(by_pair[("Sit down.", "Asseyez-vous.")]) == {FORMAL, None}
    assert 0.8 < by_pair[("Sit down.", "Asseyez-vous.")].count(FORMAL) / 200 < 0.97
    neutral = by_pair[("The cat sleeps.", "Le chat dort.")]
    assert neutral.count(FORMAL) > 50 and neutral.count(INFORMAL) > 50  # a tag never implies a second person
    assert set(by_pair[("You know what you want.", "Tu sais ce que vous voulez.")]) == {None}
    assert set(by_pair[("Forget it.", "Oublie ça.")]) == {None}  # an informal imperative the reader cannot see


def test_an_imperative_is_tagged_when_its_french_is_an_infinitive():
    assert looks_informal_imperative("Look!", "Regarde !")
    assert looks_informal_imperative("Open the door.", "Ouvre la porte.")
    assert not looks_informal_imperative("Open File", "Ouvrir le fichier")
    assert not looks_informal_imperative("The door is open.", "La porte est ouverte.")
    rng = random.Random(1)
    tags = {tag("Open File", "Ouvrir le fichier", RegisterTags(neutral=1.0), rng)[:1] for _ in range(50)}
    assert tags == set(REGISTER_MARKS.values())


def test_the_french_of_training_pairs_has_its_elisions_joined_and_the_identity_says_so():
    source = source_of([("The Union", "l' Union et qu' il")])
    chunk = next(cleaned(source).chunks(10))
    assert chunk.target == ["l'Union et qu'il"]
    assert cleaned(source).identity != source.identity
    assert registered(source, RegisterTags()).identity != cleaned(source).identity
    assert registered(source, RegisterTags()).identity != registered(source, RegisterTags(seed=2)).identity


def test_formality_defaults_to_formal_for_a_model_with_register_tags_and_auto_for_others(tiny_checkpoint,
                                                                                         tagged_checkpoint):
    from nmt.decoding.configuration import resolve_formality
    from nmt.errors import UsageError
    from nmt.model.checkpoint import load_checkpoint

    plain, tagged = load_checkpoint(tiny_checkpoint), load_checkpoint(tagged_checkpoint)
    assert resolve_formality(tagged, None) == FORMAL
    assert resolve_formality(tagged, "informal") == INFORMAL
    assert resolve_formality(plain, None) == "auto"
    assert resolve_formality(plain, "auto") == "auto"
    with pytest.raises(UsageError, match="not trained with register tags"):
        resolve_formality(plain, "formal")


def test_every_piece_a_translator_searches_opens_with_the_tag_of_the_formality(tagged_checkpoint):
    from nmt.decoding.translate import Translator
    from nmt.model.checkpoint import load_checkpoint
    from tests.conftest import decoding

    checkpoint = load_checkpoint(tagged_checkpoint)
    translator = Translator.from_checkpoint(checkpoint, decoding(checkpoint))
    tokenizer = translator.tokenizer
    formal, informal = (tokenizer.register_id(REGISTER_MARKS[r]) for r in (FORMAL, INFORMAL))
    line = "A man in a blue shirt is standing on a ladder, cleaning a window. " * 3  # cut in pieces
    assert translator.formality == FORMAL
    pieces = [piece for unit in translator._units(line) for piece in unit.pieces]
    assert len(pieces) > 1 and all(piece[0] == formal and formal not in piece[1:] for piece in pieces)
    assert all(len(piece) <= translator.max_piece_tokens for piece in pieces)
    translator.formality = INFORMAL
    assert all(unit.pieces[0][0] == informal for unit in translator._units(line))
    translator.formality = "auto"
    assert not {formal, informal} & {i for unit in translator._units(line) for p in unit.pieces for i in p}
    assert len(translator.translate([line, "", "A dog."])) == 3


@pytest.mark.parametrize("vous, tu", [
    ("Cliquez", "Clique"), ("Sélectionnez", "Sélectionne"), ("Saisissez", "Saisis"), ("Choisissez", "Choisis"),
    ("Remplissez", "Remplis"), ("Glissez", "Glisse"), ("Laissez", "Laisse"), ("Utilisez", "Utilise"),
    ("Réservez", "Réserve"), ("Envoyez", "Envoie"), ("Essayez", "Essaie"), ("Répétez", "Répète"), ("Créez", "Crée"),
    ("Levez", "Lève"), ("Appelez", "Appelle"), ("Jetez", "Jette"), ("Achetez", "Achète"), ("Réglez", "Règle"),
    ("Prenez", "Prends"), ("Obtenez", "Obtiens"), ("Rejoignez", "Rejoins"), ("Attendez", "Attends"),
    ("Demandez", "Demande"), ("Recevez", "Reçois"), ("Inscrivez", "Inscris"), ("Voyez", "Vois"), ("Allez", "Va"),
    ("Faites", "Fais"), ("Servez", "Sers"), ("Traduisez", "Traduis"), ("réessayez", "réessaie")])
def test_a_vous_imperative_has_its_tu_form(vous, tu):
    from nmt.text.register import tu_imperative

    assert tu_imperative(vous) == tu


@pytest.mark.parametrize("french, informal", [
    ("Sélectionnez l'extension que tu veux supprimer.", "Sélectionne l'extension que tu veux supprimer."),
    ("Spécifiez les propriétés de ton dégradé, puis cliquez sur ce bouton", "Spécifie les propriétés de ton "
     "dégradé, puis clique sur ce bouton"),
    ("Servez-vous de fruits, s'il te plaît.", "Sers-toi de fruits, s'il te plaît."),
    ("Connectez-vous, puis réessayez.", "Connecte-toi, puis réessaie."),
    ("Ne cliquez pas ici.", "Ne clique pas ici."),
    ("Allez-y !", "Vas-y !"),
    ("Dites-moi tout.", "Dis-moi tout."),
    ("Veuillez patienter.", "Merci de patienter."),
    ("Veuillez entrer ton nom.", "Merci d'entrer ton nom."),
    ("Veuillez vous connecter.", "Merci de te connecter."),
    ("Voulez-vous continuer ?", "Voulez-vous continuer ?"),  # a question, not an imperative
    ("Que voulez-vous que tu fasses ?", "Que voulez-vous que tu fasses ?"),
    ("Si vous voulez, cliquez ici.", "Si vous voulez, cliquez ici."),  # tu here would mix both registers
    ("Les erreurs faites hier.", "Les erreurs faites hier."),  # a participle
    ("Rendez-vous au bureau.", "Rendez-vous au bureau."),
    ("Chez Perez.", "Chez Perez."),
])
def test_asked_for_tu_the_vous_imperatives_the_model_wrote_become_tu_s(french, informal):
    from nmt.text.register import informal_imperatives

    assert informal_imperatives(french) == informal


@pytest.mark.parametrize("french, formal", [
    ("Contente-toi de continuer.", "Contentez-vous de continuer."),  # "Log in to continue.", asked for vous
    ("Connecte-toi à votre compte.", "Connectez-vous à votre compte."),
    ("Appelle-nous au 555-0199.", "Appelez-nous au 555-0199."),
    ("Dis-moi tout.", "Dites-moi tout."),
    ("Vas-y !", "Allez-y !"),
    ("Va-t'en !", "Allez-vous-en !"),
    ("Donne-le-moi.", "Donnez-le-moi."),
    ("Inscris-toi ici, puis choisis-en un.", "Inscrivez-vous ici, puis choisissez-en un."),
    ("Essaie-le, installe-le et jette-le.", "Essayez-le, installez-le et jetez-le."),
    ("Connecte-toi avec ton compte.", "Connecte-toi avec ton compte."),  # vous here would mix both registers
    ("Lève-toi.", "Lève-toi."),  # levez or lévez: not known without a lexicon, left
    ("Sommes-nous prêts ? Pouvons-nous partir ?", "Sommes-nous prêts ? Pouvons-nous partir ?"),  # questions
    ("Rendez-vous demain, cliquez-le.", "Rendez-vous demain, cliquez-le."),
    ("Celui-là, peut-être.", "Celui-là, peut-être."),
])
def test_asked_for_vous_the_tu_imperatives_with_a_pronoun_become_vous_s(french, formal):
    from nmt.text.register import formal_imperatives

    assert formal_imperatives(french) == formal


def test_a_translator_asked_for_tu_writes_the_imperatives_in_tu_and_leaves_them_otherwise(tagged_checkpoint):
    from nmt.decoding.translate import Translator
    from nmt.model.checkpoint import load_checkpoint
    from tests.conftest import decoding

    checkpoint = load_checkpoint(tagged_checkpoint)
    translator = Translator.from_checkpoint(checkpoint, decoding(checkpoint))
    assert translator._finished("Saisissez ton nom: ici.", ()) == "Saisissez ton nom\u00a0: ici."  # formal: as written
    assert translator._finished("Connecte-toi ici.", ()) == "Connectez-vous ici."
    translator.formality = INFORMAL
    assert translator._finished("Saisissez ton nom: ici.", ()) == "Saisis ton nom\u00a0: ici."
