#!/bin/bash
# Proves that a test depends on a rule of the fake CUDA driver: the test
# passes with every rule on and fails (a test failure, not a crash) with
# KILN_FAKE_CUDA_DISABLE=RULE. Usage: rule_must_fail.sh TEST_BINARY RULE GTEST_NAME
set -u
bin=$1 rule=$2 name=$3
on=$("$bin" --gtest_filter="$name" 2>&1)
if [ $? -ne 0 ] || ! grep -q "^\[  PASSED  \] 1 test" <<<"$on"; then
  echo "FAIL: $name does not pass with every rule on:"
  tail -40 <<<"$on"
  exit 1
fi
off=$(KILN_FAKE_CUDA_DISABLE=$rule "$bin" --gtest_filter="$name" 2>&1)
rc=$?
if [ $rc -eq 1 ] && grep -q "^\[  FAILED  \] $name" <<<"$off"; then
  echo "ok: $name passes with every rule on and fails with rule \"$rule\" off:"
  grep -A4 "Failure" <<<"$off" | head -15
  exit 0
fi
echo "FAIL: $name did not fail (exit $rc) with KILN_FAKE_CUDA_DISABLE=$rule:"
tail -40 <<<"$off"
exit 1
