"""The fourth round's shape and mix, chosen by short proxies started from the shipped weights (issue 92).

    python benchmarks/round4_proxies.py prepare                 # the valid pairs, the grown starts, each mix's cache
    python benchmarks/round4_proxies.py run as-is deep-encoder  # two proxies side by side, one thread each
    python benchmarks/round4_proxies.py eval as-is deep-encoder # their last weights, greedy, on each dev set
    python benchmarks/round4_proxies.py eval shipped            # the shipped model, the same way
    python benchmarks/round4_proxies.py report                  # the table for benchmarks/GENERAL.md

Each proxy trains the shipped general model (or a model grown from it by `nmt grow`) for the same training
time on one thread, two at a time so that both see the same machine: `--max-minutes` with a short warmup and
the rate falling linearly to zero when the time is spent, so that a larger model pays for its slower updates.
What is compared: the validation loss per character of the French (comparable across shapes and mixes) on the
run's validation pairs (300 each of europarl:dev, tatoeba:dev, news:dev, software-ui:dev and web-apps:dev),
and greedy BLEU on the first 500 pairs of each dev set. Needs Europarl v7 (NMT_EUROPARL_DIR or
../shared/data/europarl).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from nmt.data.corpus import external_dir

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "runs" / "round4-proxies"
NMT = [sys.executable, "-m", "nmt_cli.main"]
SHIPPED = ROOT / "data" / "models" / "general.pt"
MINUTES = 20
ROUND3 = "tatoeba*12,multi30k*3,news-commentary*6,software-ui*4,software-ui-extra*4,python-docs*2,news*8"
MIXES = {"web4": f"{ROUND3},web-apps*4,help-docs", "web12": f"{ROUND3},web-apps*12,help-docs*2"}
DEV_SETS = ("web-apps:dev", "software-ui:dev", "news:dev", "europarl:dev", "tatoeba:dev")
VALID_PAIRS = 300  # of each dev set, for the runs' validation loss
EVAL_PAIRS = 500  # of each dev set, for the greedy BLEU at the end

PROXIES = {  # name -> (what it tests, its starting weights, its mix)
    "as-is": ("the shipped shape (3+3 layers, d_ff 1024), web-apps*4, help-docs*1", SHIPPED, "web4"),
    "deep-encoder": ("6 encoder layers: the 3 trained ones stacked twice (shallow-to-deep)",
                     RUNS / "deep-encoder.start.pt", "web4"),
    "wide-ffn": ("d_ff 2048 in every layer: the trained units and 1,024 silent new ones",
                 RUNS / "wide-ffn.start.pt", "web4"),
    "as-is-web12": ("the shipped shape, web-apps*12, help-docs*2", SHIPPED, "web12"),
}
GROW = {"deep-encoder": ["--encoder-layers", "6"], "wide-ffn": ["--d-ff", "2048"]}


def data_options(mix: str) -> list[str]:
    europarl = external_dir("europarl")
    return ["--data", MIXES[mix], "--src-file", str(europarl / "train.en.gz"), "--tgt-file",
            str(europarl / "train.fr.gz"), "--augment", "--augment-swap", "0.25", "--register-tags",
            "--spm", str(RUNS / "spm.model")]


def prepare() -> None:
    """The shipped model's sentencepiece model, the validation pairs, the grown starts, each mix's token cache."""
    from nmt.data.corpus import parse_test_set
    from nmt.model.checkpoint import load_checkpoint

    RUNS.mkdir(parents=True, exist_ok=True)
    (RUNS / "spm.model").write_bytes(load_checkpoint(SHIPPED).spm_model)
    sets = [parse_test_set(name) for name in DEV_SETS]
    for side in ("source", "target"):
        lines = [line for pairs in sets for line in getattr(pairs, side)[:VALID_PAIRS]]
        (RUNS / f"valid.{'en' if side == 'source' else 'fr'}").write_text("".join(f"{line}\n" for line in lines))
    for name, options in GROW.items():
        if not PROXIES[name][1].is_file():
            subprocess.run(NMT + ["grow", "--model", str(SHIPPED), "--output", str(PROXIES[name][1]), *options],
                           check=True)
    for mix in MIXES:
        subprocess.run(NMT + ["prepare", *data_options(mix)], check=True, env={**os.environ, "NMT_EUROPARL_DIR":
                                                                                 str(external_dir("europarl"))})


def train_options(name: str) -> list[str]:
    _, start, mix = PROXIES[name]
    return ["train", *data_options(mix), "--init-from", str(start), "--valid-src", str(RUNS / "valid.en"),
            "--valid-tgt", str(RUNS / "valid.fr"), "--precision", "auto", "--max-minutes", str(MINUTES),
            "--decay", "linear", "--lr", "1e-3", "--warmup", "150", "--max-tokens", "4096", "--threads", "1",
            "--valid-every", "100000", "--log-every", "50", "--save-every", "200", "--keep-last", "1",
            "--out", str(RUNS / name)]


def run(names: list[str]) -> None:
    for name in names:
        (RUNS / name).mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "NMT_EUROPARL_DIR": str(external_dir("europarl"))}
    jobs = [subprocess.Popen(NMT + train_options(name), stderr=open(RUNS / name / "train.log", "a"), env=env)
            for name in names]
    for name, job in zip(names, jobs, strict=True):
        if job.wait():
            print(f"{name}: nmt train exited with {job.returncode}; see {RUNS / name / 'train.log'}")


def evaluate(names: list[str]) -> None:
    """Greedy BLEU and chrF of each proxy's last weights on the first EVAL_PAIRS of each dev set (fp32 path)."""
    env = {**os.environ, "NMT_EUROPARL_DIR": str(external_dir("europarl"))}
    for name in names:
        scores = {}
        model = SHIPPED if name == "shipped" else RUNS / name / "last.pt"
        for test in DEV_SETS:
            command = NMT + ["eval", "--model", str(model), "--test", test, "--beam", "1",
                             "--exact", "--limit", str(EVAL_PAIRS), "--format", "jsonl"]
            result = subprocess.run(command, capture_output=True, text=True, env=env)
            if result.returncode:
                sys.exit(f"{name} {test}: {result.stderr.strip()}")
            record = json.loads(result.stdout)
            scores[test] = {"bleu": round(record["bleu"], 2), "chrf": round(record["chrf"], 2)}
        (RUNS / name).mkdir(parents=True, exist_ok=True)
        (RUNS / name / "dev_scores.json").write_text(json.dumps(scores, indent=1) + "\n")
        print(name, scores)


def nats_per_character(folder: Path, valid_loss: float) -> float:
    """The validation loss per character of the French side (the loss is per token, the same vocabulary)."""
    from nmt.data.corpus import read_lines
    from nmt.model.checkpoint import load_checkpoint

    french = read_lines(RUNS / "valid.fr")
    tokens = sum(len(ids) + 1 for ids in load_checkpoint(folder / "last.pt").tokenizer().encode_batch(french))
    return valid_loss * tokens / sum(map(len, french))


def report() -> None:
    rows = []
    for name, (what, _, _) in PROXIES.items():
        folder = RUNS / name
        if not (folder / "dev_scores.json").is_file():
            continue
        scores = json.loads((folder / "dev_scores.json").read_text())
        metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        steps = max(m["step"] for m in metrics)
        speed = [m["tokens_per_s"] for m in metrics if "tokens_per_s" in m]
        valid_loss = [m["valid_loss"] for m in metrics if "valid_loss" in m][-1]
        cells = [f"{scores[test]['bleu']:.2f} / {scores[test]['chrf']:.1f}" for test in DEV_SETS]
        rows.append(f"| {name} | {what} | {steps} | {sum(speed) / len(speed):.0f} | {valid_loss:.4f} | "
                    f"{nats_per_character(folder, valid_loss):.4f} | " + " | ".join(cells) + " |")
    header = ("| proxy | what | updates | target tokens/s | validation loss / token | / character | "
              + " | ".join(DEV_SETS) + " |\n|" + "---|" * (6 + len(DEV_SETS)))
    print(header + "\n" + "\n".join(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("prepare", "run", "eval", "report"))
    parser.add_argument("names", nargs="*", help=", ".join(PROXIES))
    arguments = parser.parse_args()
    unknown = set(arguments.names) - set(PROXIES) - ({"shipped"} if arguments.action == "eval" else set())
    if unknown:
        parser.error(f"unknown proxies {', '.join(sorted(unknown))}; known: {', '.join(PROXIES)}")
    {"prepare": lambda: prepare(), "run": lambda: run(arguments.names), "eval": lambda: evaluate(arguments.names),
     "report": report}[arguments.action]()


if __name__ == "__main__":
    main()
