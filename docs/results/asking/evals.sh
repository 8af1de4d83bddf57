#!/bin/bash
# Evaluations of a candidate planner adapter for issue 40 (asking, saying no) and the built-in
# sets. Usage: evals.sh ADAPTER RESULTS [PLANS [SETS]]
#   PLANS: calibration plans (default 300); SETS: "all" (default) or "asking" (the asking runs
#   only). Run 1 (ambiguous_impossible/): evals.sh build/train_40/adapter build/train_40/results
#   Run 2 (ambiguous_only/): evals.sh build/train_40b/adapter build/train_40b/results 150 asking
set -u
A=$1
R=$2
PLANS=${3:-300}
SETS=${4:-all}
mkdir -p "$R"
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID=74
S=.venv/bin/saycan
E="$S eval --adapter $A --jobs 2 --threads 1"
run() { name=$1; shift; echo "== $name"; rm -f $R/$name.jsonl; "$@" --jsonl $R/$name.jsonl > $R/$name.txt 2>&1; tr '\r' '\n' < $R/$name.txt | grep -E "^saycan \(|asked for help|runs of|rror" ; }
echo "== calibrate"; /usr/bin/time -f "%e s" $S calibrate --plans "$PLANS" --adapter $A --out $R/cal.json 2>&1 | grep -vE "it/s|s/it|task/s|s/task" | tail -8
if [ "$SETS" = all ]; then
  run impossible $E --tasks impossible_dev.yaml
  run impossible_norefuse $E --tasks impossible_dev.yaml --no-refuse
  run asking_never $E --tasks asking_dev.yaml
fi
run asking_015 $E --tasks asking_dev.yaml --ask 0.15 --calibration $R/cal.json
run asking_010 $E --tasks asking_dev.yaml --ask 0.10 --calibration $R/cal.json
[ "$SETS" = all ] && run tasks_never $E --tasks tasks.yaml
run tasks_015 $E --tasks tasks.yaml --ask 0.15 --calibration $R/cal.json
if [ "$SETS" = all ]; then
  run tasks_extra $E --tasks tasks_extra.yaml
  run tasks_dev $E --tasks tasks_dev.yaml
fi
