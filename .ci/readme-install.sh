#!/usr/bin/env bash
# The front door as a new user meets it: a fresh clone of this repository, the README's install
# block run verbatim in it, `budgetdsl --version` against pyproject.toml and the README's comment,
# then the pre-commit configuration of docs/pr-workflow.md, verbatim, in a repository of plans:
# it must pass the example plans and fail a base that breaks the plans extending it.
# Called from .ci/run; by hand: bash .ci/readme-install.sh (needs PyPI for the dependencies).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

block() {  # block FILE HEADING LANG: the first ```LANG block after HEADING in FILE
  python3 - "$@" <<'PY'
import re, sys
path, heading, lang = sys.argv[1:]
text = open(path, encoding="utf-8").read()
print(re.search(rf"```{lang}\n(.*?)```", text[text.index(heading):], re.S).group(1), end="")
PY
}

git clone -q "$repo" "$work/clone"  # the committed tree, as a clone gets it
cd "$work/clone"
block README.md "## Install from the repository" sh > "$work/install.sh"
echo "readme-install: running the README's install block in a fresh clone:"
sed 's/^/  | /' "$work/install.sh"
bash -euo pipefail "$work/install.sh" | tee "$work/install.out"

want="$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
said="$(grep -o '# budgetdsl [0-9][0-9a-z.]*' "$work/install.sh" | cut -d' ' -f3)"
got="$(.venv/bin/budgetdsl --version)"
if [ "$got" != "budgetdsl $want" ] || [ "$said" != "$want" ]; then
  echo "readme-install: budgetdsl --version says '$got', pyproject.toml $want, the README $said" >&2
  exit 1
fi

# pre-commit, as docs/pr-workflow.md configures it, in a user's repository of plans.
.venv/bin/pip install -q pre-commit
mkdir "$work/plans-repo" && cd "$work/plans-repo"
cp -r "$work/clone/plans" plans
mkdir -p tests/fixtures && cp -r "$work/clone/tests/fixtures/calibration" tests/fixtures/calibration
block "$work/clone/docs/pr-workflow.md" "## pre-commit" yaml > .pre-commit-config.yaml
g() { git -c user.name=ci -c user.email=ci@example.invalid "$@"; }
g init -q && g add . && g commit -qm plans
export PRE_COMMIT_HOME="$work/pre-commit-home"
# shellcheck disable=SC1091  # the venv's activate script, as the docs say
source "$work/clone/.venv/bin/activate"
pre-commit run --all-files
sed -i 's/tensor_parallel: 1/tensor_parallel: 3/' plans/base/a100-cluster.yaml
g add plans/base/a100-cluster.yaml
if pre-commit run > "$work/hook.out" 2>&1; then
  cat "$work/hook.out"; echo "readme-install: the hooks passed a base that breaks its plans" >&2; exit 1
fi
grep -q 'error\[plan-rule\]' "$work/hook.out" || { cat "$work/hook.out"; exit 1; }
echo "readme-install: ok (budgetdsl $want; the README's install and the documented pre-commit hooks)"
