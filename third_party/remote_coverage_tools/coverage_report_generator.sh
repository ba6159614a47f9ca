#!/bin/sh
echo "coverage unsupported offline (remote_coverage_tools is a local stub)" >&2
exit 1
