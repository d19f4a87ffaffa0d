#!/bin/sh
# The fault suite's exec handler: sleeps $2 seconds, then appends
# "job_id lease_token start_ns end_ns worker_pid" to the ledger file $1 (one
# short line, one O_APPEND write).  A run that is killed writes nothing; a
# run that exits 0 has always written its line first.
s=$(date +%s%N)
sleep "$2"
e=$(date +%s%N)
echo "$PGJOB_JOB_ID $PGJOB_LEASE_TOKEN $s $e $PPID" >>"$1"
