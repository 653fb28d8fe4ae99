#!/usr/bin/env bash
# chromium.sh makes sure Debian's Chromium is installed, for the browser
# test of the control API's web page (control/page_test.go, driven with
# chromedp).
#
#   scripts/chromium.sh start   install the chromium package if it is
#                               missing (apt-get update once, then
#                               apt-get install -y chromium); prints, as the
#                               LAST line, EXACTLY_CHROMIUM=<path>
#   scripts/chromium.sh stop    nothing: the test starts and ends its own
#                               browser
set -euo pipefail

log() { echo "chromium.sh: $*" >&2; }

case "${1:-}" in
start)
	if ! command -v chromium >/dev/null 2>&1; then
		log "installing Debian's chromium package"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq >&2
		apt-get install -y -qq chromium >&2
	fi
	echo "EXACTLY_CHROMIUM=$(command -v chromium)"
	;;
stop) ;;
*)
	echo "usage: scripts/chromium.sh start|stop" >&2
	exit 2
	;;
esac
