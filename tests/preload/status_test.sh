#!/bin/sh
# SPDX-License-Identifier: MIT
# status_test.sh BUILD_DIR: zl-ss against preloaded processes, a zipline
# server and forged status pages (status_test.py says what is checked).
command -v python3 > /dev/null 2>&1 || { echo "SKIP: no python3"; exit 77; }
exec python3 "$(dirname "$0")/status_test.py" "$1"
