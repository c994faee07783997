#!/usr/bin/env python3
"""The optimiser process of `ebb-bench tune` (docs/experiments.md).

ebb-bench embeds this file and runs it with `python3 -c`; it owns the
benchmark runs, this process owns the Bayesian optimiser (optuna's TPE
sampler by default), as MLOS splits the optimiser from the system it tunes
(seed 002 section 6.3.1). They talk over stdin/stdout, one JSON object per
line; every request gets one reply line:

  -> {"direction": "maximize", "seed": 7, "sampler": "tpe", "startup_trials": 10,
      "space": [{"name": "write_buffer_size", "type": "int", "low": 1048576,
                 "high": 134217728, "log": true, "step": 1},
                {"name": "compression_type", "type": "categorical",
                 "choices": ["none", "lz4"]}]}
  <- {"ready": true, "optuna": "4.5.0", "sampler": "TPESampler", "python": "3.11.7"}
  -> {"cmd": "ask"}
  <- {"trial": 0, "params": {"write_buffer_size": 8388608, "compression_type": "lz4"}}
  -> {"cmd": "tell", "trial": 0, "value": 41.5}      (or "failed": true)
  <- {"ok": true}
  -> {"cmd": "quit"}

A problem is answered with {"error": "..."} and the process exits. Nothing
else may go to stdout: optuna's log goes to stderr (ebb-bench keeps it in
optimizer.log). Needs optuna (tools/requirements.txt).
"""

import json
import sys
import warnings


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def fail(message):
    send({"error": message})
    sys.exit(1)


def make_sampler(optuna, config):
    name = config.get("sampler", "tpe")
    seed = config.get("seed")
    startup = int(config.get("startup_trials", 10))
    if name == "tpe":
        # multivariate: model the options jointly, as the paper's joint tuning needs.
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "gp":
        try:
            import scipy  # noqa: F401
            import torch  # noqa: F401
        except ImportError as e:
            fail(f"sampler gp needs torch and scipy, which tools/requirements.txt does not install ({e}); "
                 "use sampler = \"tpe\" or pip install torch scipy")
        return optuna.samplers.GPSampler(seed=seed, n_startup_trials=startup)
    fail(f"unknown sampler {name!r} (expected tpe, random or gp)")


def make_distribution(optuna, p):
    kind = p.get("type")
    if kind == "int":
        return optuna.distributions.IntDistribution(
            int(p["low"]), int(p["high"]), log=bool(p.get("log")), step=int(p.get("step") or 1))
    if kind == "float":
        return optuna.distributions.FloatDistribution(
            float(p["low"]), float(p["high"]), log=bool(p.get("log")), step=p.get("step"))
    if kind == "categorical":
        return optuna.distributions.CategoricalDistribution(list(p["choices"]))
    fail(f"parameter {p.get('name')!r}: unknown type {kind!r}")


def main():
    try:
        import optuna
    except ImportError as e:
        fail(f"optuna is not installed ({e}): bash tools/deps.sh makes .venv/ with it; "
             "then EBB_PYTHON=.venv/bin/python3")
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    first = sys.stdin.readline()
    if not first:
        fail("no configuration line on stdin")
    try:
        config = json.loads(first)
        space = {p["name"]: make_distribution(optuna, p) for p in config["space"]}
        sampler = make_sampler(optuna, config)
        study = optuna.create_study(direction=config.get("direction", "maximize"), sampler=sampler)
    except (KeyError, TypeError, ValueError) as e:
        fail(f"bad configuration: {e!r}")
    send({"ready": True, "optuna": optuna.__version__, "sampler": type(sampler).__name__,
          "python": sys.version.split()[0]})

    pending = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError as e:
            fail(f"not JSON: {line!r} ({e})")
        cmd = msg.get("cmd")
        if cmd == "ask":
            trial = study.ask(fixed_distributions=space)
            pending[trial.number] = trial
            send({"trial": trial.number, "params": trial.params})
        elif cmd == "tell":
            trial = pending.pop(msg.get("trial"), None)
            if trial is None:
                fail(f"tell for unknown trial {msg.get('trial')!r}")
            if msg.get("failed"):
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, float(msg["value"]))
            send({"ok": True})
        elif cmd == "quit":
            return
        else:
            fail(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main()
