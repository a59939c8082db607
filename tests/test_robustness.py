"""The robustness sets and their report: what counts as an entity kept, a loop, and the CLI's table."""

from __future__ import annotations

import json
import subprocess
import sys

from nmt.apps.robustness import (
    CATEGORIES,
    format_report,
    intact_entities,
    load_robustness,
    loops,
    names_kept,
    robustness_report,
)


def test_both_halves_cover_every_category_with_references_that_keep_every_entity():
    for split in ("dev", "test"):
        lines = load_robustness(split)
        assert len(lines) >= 100 and {line.category for line in lines} == set(CATEGORIES)
        assert all(line.plain for line in lines if line.category in ("all_caps", "title_case"))
        for line in lines:
            count, kept = intact_entities(line.source, line.reference)
            assert kept == count, line.source
    assert not {line.source for line in load_robustness("dev")} & {line.source for line in load_robustness("test")}


def test_garbled_numbers_and_links_are_counted_as_lost():
    source = "I paid $1,249.99 for 3 laptops, see https://example.com/a."
    assert intact_entities(source, "J'ai payé 1 249,99 $ pour 3 portables, voir https://example.com/a.") == (3, 3)
    assert intact_entities(source, "J'ai payé 114, 29 pour trois portables, voir https://example.com.") == (3, 0)


def test_names_the_reference_keeps_must_be_kept():
    source, reference = "Dmitri Volkov arrived in London on Sunday.", "Dmitri Volkov est arrivé à Londres dimanche."
    assert names_kept(source, reference, "Dmitri Volkov est arrivé à Londres dimanche.")
    assert names_kept(source, reference, "Dmitri Volkov est venu à London le dimanche.")  # London: not asked for
    assert not names_kept(source, reference, "Dimitri Volkov est arrivé à Londres dimanche.")


def test_loops_are_repeated_units_not_ordinary_repetition():
    assert loops("DANNNNNNNOOO D D D DONNNI") and loops("d'étrétrétrétrévé") and loops("de la de la de la de la de la")
    assert not loops("Il a payé 1 000 000 000 $.") and not loops("Non, non, non !")


def test_report_of_the_references_themselves_is_perfect():
    lines = load_robustness("dev")
    plain = {index: line.reference for index, line in enumerate(lines) if line.plain}
    report = robustness_report(lines, [line.reference for line in lines], plain)
    assert report["all"].entities_exact == 1.0 and report["all"].loops == 0 and report["all"].chrf == 100.0
    assert report["all"].passed == report["all"].lines
    assert report["all_caps"].caps_kept == report["all_caps"].lines
    table = format_report(report)
    assert table[0].split()[:4] == ["category", "lines", "entities", "intact"] and len(table) == len(CATEGORIES) + 2
    assert next(row for row in table if row.startswith("urls")).split()[2:4] == ["10/10", "100.0%"]


def test_a_line_passes_only_with_its_entities_no_loop_its_meaning_in_capitals_and_a_long_line_s_content():
    lines = load_robustness("dev")
    plain = {index: line.reference for index, line in enumerate(lines) if line.plain}
    spoiled = {"urls": lambda text: text.replace(".", " "), "long": lambda text: text[: len(text) // 4],
               "all_caps": lambda text: "BONJOUR.", "names": str.lower}
    translations = [spoiled.get(line.category, lambda text: text)(line.reference) for line in lines]
    report = robustness_report(lines, translations, plain)
    assert {category: report[category].passed for category in spoiled} == dict.fromkeys(spoiled, 0)
    assert report["all"].passed == report["all"].lines - sum(report[category].lines for category in spoiled)


def test_eval_on_a_robustness_set_reports_each_category(tiny_checkpoint):
    command = [sys.executable, "-m", "nmt_cli.main", "eval", "--test", "robustness:dev", "--model",
               str(tiny_checkpoint), "--beam", "1"]
    result = subprocess.run(command + ["--json"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    categories = json.loads(result.stdout)["categories"]
    assert set(categories) >= {"numbers", "urls", "all_caps", "all"} and categories["all"]["lines"] == 120
    # the tiny model is untrained: the placeholders alone keep its links and numbers
    assert categories["urls"]["intact"] == categories["urls"]["entities"] > 0
