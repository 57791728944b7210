#!/bin/sh
# One chat request to a SpecChat server from the shell: sh curl_chat.sh http://127.0.0.1:8080/v1
set -eu
url="${1:-http://127.0.0.1:8080/v1}"
curl --silent --show-error --fail-with-body "$url/chat/completions" \
  -H "Content-Type: application/json" \
  -d '{"messages": [{"role": "user", "content": "Say hello"}], "temperature": 0, "max_tokens": 8}'
