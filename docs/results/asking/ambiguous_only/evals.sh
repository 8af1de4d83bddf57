#!/bin/bash
# Evaluations of a candidate planner adapter for issue 40 (asking, saying no) and the built-in sets.
set -u
A=${1:-build/train_40b/adapter}
R=${2:-build/train_40b/results}
mkdir -p $R
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID=74
S=.venv/bin/saycan
E="$S eval --adapter $A --jobs 2 --threads 1"
run() { name=$1; shift; echo "== $name"; rm -f $R/$name.jsonl; "$@" --jsonl $R/$name.jsonl > $R/$name.txt 2>&1; tr '\r' '\n' < $R/$name.txt | grep -E "^saycan \(|asked for help|runs of|rror" ; }
echo "== calibrate"; /usr/bin/time -f "%e s" $S calibrate --plans 150 --adapter $A --out $R/cal.json 2>&1 | grep -vE "it/s|s/it|task/s|s/task" | tail -8
run asking_015 $E --tasks asking_dev.yaml --ask 0.15 --calibration $R/cal.json
run asking_010 $E --tasks asking_dev.yaml --ask 0.10 --calibration $R/cal.json
run tasks_015 $E --tasks tasks.yaml --ask 0.15 --calibration $R/cal.json
