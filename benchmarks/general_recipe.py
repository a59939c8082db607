"""The general model's recipe, chosen by short proxy runs at the same CPU budget (issue 46).

    python benchmarks/general_recipe.py run small deep       # train two proxies side by side, one thread each
    python benchmarks/general_recipe.py eval small deep      # score their last checkpoints on the dev sets
    python benchmarks/general_recipe.py report               # GENERAL_RECIPE table and picture in benchmarks/

Every proxy trains from scratch on the same prepared corpus (Europarl v7 with the embedded corpora, the
`make model-general` mix, --augment) for the same training time, `--max-minutes` with the learning rate
decaying linearly to zero when it is spent, so that a larger model is charged for its slower steps. Two run
at a time with one thread each, so that both see the same machine. Validation (excluded from the budget)
gives greedy BLEU on runs/general/valid.* (300 Europarl dev + 300 Tatoeba dev pairs) along the way; at the
end each last checkpoint is scored with beam 4 on the dev sets: europarl:dev (first 1,000 pairs),
tatoeba:dev and news-commentary:dev_newsdiscuss. Needs Europarl v7 (NMT_EUROPARL_DIR or
../shared/data/europarl) and about 30 minutes a pair of proxies on 2 cores.
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
RUNS = ROOT / "runs" / "proxies"
NMT = [sys.executable, "-m", "nmt_cli.main"]
MINUTES = 30
MIX = "tatoeba*4,multi30k,news-commentary*2"
HEAVY_MIX = "tatoeba*12,multi30k*3,news-commentary*6"  # three times the embedded corpora's share
DEV_SETS = (("europarl:dev", 1000), ("tatoeba:dev", None), ("news-commentary:dev_newsdiscuss", None))

DEEP = ["--encoder-layers", "6", "--decoder-layers", "2"]
PROXIES = {  # name -> (what it tests, nmt train options beyond the common ones)
    "small": ("the small preset: d_model 256, d_ff 1024, 3+3 layers, 8k pieces", []),
    "deep": ("6 encoder and 2 decoder layers, d_model 256", DEEP),
    "small-wide": ("3+3 layers, d_model 384, d_ff 1536, 6 heads", ["--d-model", "384", "--d-ff", "1536",
                                                                    "--heads", "6"]),
    "small-16k": ("the small preset, 16k pieces", ["--spm", str(ROOT / "runs/general/spm16k.model")]),
    "small-heavy-mix": ("the small preset, the embedded corpora three times as often", ["--data", HEAVY_MIX]),
}
PROXIES["small-16k-again"] = ("small-16k again, on a quiet machine", PROXIES["small-16k"][1])


def common_options(name: str) -> list[str]:
    europarl = external_dir("europarl")
    valid = ROOT / "runs" / "general"
    return ["train", "--data", MIX, "--src-file", str(europarl / "train.en.gz"), "--tgt-file",
            str(europarl / "train.fr.gz"), "--augment", "--augment-swap", "0.25", "--valid-src",
            str(valid / "valid.en"), "--valid-tgt", str(valid / "valid.fr"), "--preset", "small", "--precision",
            "bf16", "--max-minutes", str(MINUTES), "--decay", "linear", "--lr", "1.5e-3", "--warmup", "150",
            "--max-tokens", "4096", "--threads", "1", "--valid-every", "200", "--log-every", "50",
            "--save-every", "200", "--keep-last", "1", "--spm", str(valid / "spm8k.model"), "--out",
            str(RUNS / name)]


def options_of(name: str) -> list[str]:
    """The common options, with the proxy's own in place of those it names."""
    options, own = common_options(name), PROXIES[name][1]
    for flag in own[::2]:
        if flag in options:
            at = options.index(flag)
            del options[at : at + 2]
    return options + own


def run(names: list[str]) -> None:
    for name in names:
        (RUNS / name).mkdir(parents=True, exist_ok=True)
    jobs = [subprocess.Popen(NMT + options_of(name), stderr=open(RUNS / name / "train.log", "a"))
            for name in names]
    for name, job in zip(names, jobs, strict=True):
        if job.wait():
            print(f"{name}: nmt train exited with {job.returncode}; see {RUNS / name / 'train.log'}")


def evaluate(names: list[str]) -> None:
    for name in names:
        scores = {}
        for test, limit in DEV_SETS:
            command = NMT + ["eval", "--model", str(RUNS / name / "last.pt"), "--test", test, "--beam", "4",
                             "--lenpen", "1.0", "--exact", "--format", "jsonl"]
            command += ["--limit", str(limit)] if limit else []
            result = subprocess.run(command, capture_output=True, text=True, env={**os.environ})
            if result.returncode:
                sys.exit(f"{name} {test}: {result.stderr.strip()}")
            record = json.loads(result.stdout)
            scores[test] = {"bleu": round(record["bleu"], 2), "chrf": round(record["chrf"], 2)}
        (RUNS / name / "dev_scores.json").write_text(json.dumps(scores, indent=1) + "\n")
        print(name, scores)


def nats_per_character(folder: Path, valid_loss: float) -> float:
    """The validation loss per character of the French side: comparable across vocabularies, where the loss
    per token is not (a larger vocabulary has fewer, harder tokens)."""
    from nmt.data.corpus import read_lines
    from nmt.model.checkpoint import load_checkpoint

    french = read_lines(ROOT / "runs" / "general" / "valid.fr")
    tokens = sum(len(ids) + 1 for ids in load_checkpoint(folder / "last.pt").tokenizer().encode_batch(french))
    return valid_loss * tokens / sum(map(len, french))


def report() -> None:
    rows, runs = [], []
    for name, (what, _) in PROXIES.items():
        folder = RUNS / name
        if not (folder / "dev_scores.json").is_file():
            continue
        runs.append(str(folder.relative_to(ROOT)))
        scores = json.loads((folder / "dev_scores.json").read_text())
        metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        steps = max(m["step"] for m in metrics)
        speed = [m["tokens_per_s"] for m in metrics if "tokens_per_s" in m]
        valid_loss = [m["valid_loss"] for m in metrics if "valid_loss" in m][-1]
        log = (folder / "train.log").read_text()
        millions = log.split("M parameters")[0].rsplit(" ", 1)[-1] if "M parameters" in log else "?"
        cells = [f"{scores[test]['bleu']:.2f} / {scores[test]['chrf']:.1f}" for test, _ in DEV_SETS]
        rows.append(f"| {name} | {what} | {millions} | {steps} | {sum(speed) / len(speed):.0f} | {valid_loss:.3f} | "
                    f"{nats_per_character(folder, valid_loss):.4f} | " + " | ".join(cells) + " |")
    header = ("| proxy | what | parameters (M) | updates | target tokens/s | validation loss / token | "
              "/ character | europarl:dev BLEU / chrF | tatoeba:dev | dev_newsdiscuss |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
    print(header + "\n" + "\n".join(rows))
    subprocess.run(NMT + ["plot", *runs, "--x", "minutes", "--output", "benchmarks/general-proxies.png"], check=True,
                   cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("run", "eval", "report"))
    parser.add_argument("names", nargs="*", help=", ".join(PROXIES))
    arguments = parser.parse_args()
    unknown = set(arguments.names) - set(PROXIES)
    if unknown:
        parser.error(f"unknown proxies {', '.join(sorted(unknown))}; known: {', '.join(PROXIES)}")
    if arguments.action == "run":
        run(arguments.names)
    elif arguments.action == "eval":
        evaluate(arguments.names)
    else:
        report()


if __name__ == "__main__":
    main()
