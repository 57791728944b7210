#!/usr/bin/env bash
# Build SpecChat with PyInstaller from packaging/specchat.spec.
#
#   Linux:  dist/SpecChat/SpecChat            (one-folder bundle; what CI builds and smoke-tests)
#   macOS:  dist/SpecChat.app                 (the same folder wrapped by BUNDLE), then optionally
#           signed, notarized and stapled, and zipped to dist/SpecChat-<version>-macOS.zip
#
# Usage: packaging/build.sh [extra PyInstaller options, e.g. --clean]
#
# Environment (all optional):
#   PYTHON                        interpreter with `.[package]` installed (default .venv/bin/python, else python3)
#   SPECCHAT_CODESIGN_IDENTITY    macOS: codesign identity, e.g. "Developer ID Application: Jane Doe (TEAMID1234)";
#                                 unset: PyInstaller's ad-hoc signature (runs on the building Mac only)
#   SPECCHAT_NOTARY_PROFILE       macOS: notarytool keychain profile (xcrun notarytool store-credentials), or
#   SPECCHAT_TEAM_ID, SPECCHAT_APPLE_ID, SPECCHAT_APPLE_PASSWORD
#                                 macOS: team id, Apple ID and app-specific password for notarytool
#   SPECCHAT_BUNDLE_ID, SPECCHAT_MIN_MACOS, SPECCHAT_ENTITLEMENTS: see specchat.spec
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
if [ -z "${PYTHON:-}" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
if ! "$PYTHON" -c "import PyInstaller" 2>/dev/null; then
    echo "error: PyInstaller is not installed for $PYTHON; run: $PYTHON -m pip install -e '.[package]'" >&2
    exit 2
fi
export QT_QPA_PLATFORM="${QT_QPA_PLATFORM:-offscreen}"
VERSION="$(sed -n 's/^__version__ *= *"\(.*\)"/\1/p' app/__init__.py)"

started=$(date +%s)
"$PYTHON" packaging/make_icon.py --icns build/icon/SpecChat.icns --png build/icon/SpecChat.png >/dev/null
"$PYTHON" -m PyInstaller --noconfirm --log-level "${PYINSTALLER_LOG_LEVEL:-WARN}" \
    --distpath dist --workpath build/pyinstaller "$@" packaging/specchat.spec
built=$(date +%s)

if [ "$(uname -s)" = Darwin ]; then
    BUNDLE=dist/SpecChat.app
    EXECUTABLE="$BUNDLE/Contents/MacOS/SpecChat"
    plutil -lint "$BUNDLE/Contents/Info.plist"
    if [ -n "${SPECCHAT_CODESIGN_IDENTITY:-}" ]; then
        # PyInstaller signed each binary and the bundle (hardened runtime, entitlements.plist).
        codesign --verify --deep --strict --verbose=2 "$BUNDLE"
    fi
    ZIP="dist/SpecChat-$VERSION-macOS.zip"
    notarize=()
    if [ -n "${SPECCHAT_NOTARY_PROFILE:-}" ]; then
        notarize=(--keychain-profile "$SPECCHAT_NOTARY_PROFILE")
    elif [ -n "${SPECCHAT_TEAM_ID:-}" ]; then
        : "${SPECCHAT_APPLE_ID:?set SPECCHAT_APPLE_ID to notarize with SPECCHAT_TEAM_ID}"
        : "${SPECCHAT_APPLE_PASSWORD:?set SPECCHAT_APPLE_PASSWORD (an app-specific password)}"
        notarize=(--team-id "$SPECCHAT_TEAM_ID" --apple-id "$SPECCHAT_APPLE_ID" --password "$SPECCHAT_APPLE_PASSWORD")
    fi
    if [ "${#notarize[@]}" -gt 0 ]; then
        if [ -z "${SPECCHAT_CODESIGN_IDENTITY:-}" ]; then
            echo "error: notarization needs a Developer ID signature; set SPECCHAT_CODESIGN_IDENTITY" >&2
            exit 2
        fi
        rm -f "$ZIP"
        ditto -c -k --keepParent "$BUNDLE" "$ZIP"
        xcrun notarytool submit "$ZIP" "${notarize[@]}" --wait
        xcrun stapler staple "$BUNDLE"
        spctl --assess --type execute --verbose=2 "$BUNDLE"
    fi
    # The zip users download (re-made after stapling, so the ticket travels with the app).
    rm -f "$ZIP"
    ditto -c -k --keepParent "$BUNDLE" "$ZIP"
    echo "zip: $ZIP"
else
    BUNDLE=dist/SpecChat
    EXECUTABLE="$BUNDLE/SpecChat"
fi

[ -x "$EXECUTABLE" ] || { echo "error: $EXECUTABLE was not built" >&2; exit 1; }
echo "bundle: $BUNDLE ($(du -sh "$BUNDLE" | cut -f1), $(find "$BUNDLE" -type f | wc -l | tr -d ' ') files)"
echo "executable: $EXECUTABLE"
echo "build time: $((built - started)) s"
