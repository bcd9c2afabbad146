#!/usr/bin/env bash
# Check an overlay before `kubectl apply -k`: it renders, and it sets what the base leaves to the site. Kustomize
# itself would render an overlay without them, and the cluster would then pull an image nobody pushed or run sweeps
# with no bucket; here such an overlay is refused with one line naming the value, exit 2.
#
#   deploy/kuberay/check.sh deploy/kuberay/overlays/eks
#
# Needs only kubectl (1.27+, whose built-in kustomize is v5). Checked by tests/deploy/test_kustomize_check.py.
set -euo pipefail

# The site's values, in the ConfigMap mamba-tune-settings (each overlay's configMapGenerator)
REQUIRED_SETTINGS=(MAMBA_TUNE_STORAGE MLFLOW_TRACKING_URI MLFLOW_ARTIFACTS_DESTINATION MLFLOW_BACKEND_STORE_URI)

if [[ $# -ne 1 ]]; then
  echo "error: usage: deploy/kuberay/check.sh OVERLAY_FOLDER, rule: one overlay folder, fix: e.g." \
    "deploy/kuberay/check.sh deploy/kuberay/overlays/eks" >&2
  exit 2
fi
folder=${1%/}
folder=${folder:-/}
overlay=$(basename "$folder")
refuse() {  # what, rule, fix
  echo "error: overlay $overlay: $1, rule: $2, fix: $3" >&2
  exit 2
}

command -v kubectl >/dev/null || refuse "kubectl is not installed" "the check renders the overlay with kubectl's kustomize" \
  "install kubectl 1.27 or newer"
[[ -f $folder/kustomization.yaml ]] || refuse "$folder has no kustomization.yaml" "an overlay is a kustomize folder" \
  "copy one of deploy/kuberay/overlays/ and name that copy"
problems=$(mktemp)
trap 'rm -f "$problems"' EXIT
if ! rendered=$(kubectl kustomize "$folder" 2>"$problems"); then  # its warnings kept out of the YAML read below
  refuse "kubectl kustomize $folder fails ($(grep -m1 . "$problems"))" "the overlay must render" \
    "correct the file it names"
fi

# Every image with its registry: the base's placeholders (mamba-tune:cpu, mamba-tune:cuda) have none, so an overlay
# without `images:` leaves them so, and Kubernetes would look for them on Docker Hub.
while read -r image; do
  image=${image//[\"\']/}
  host=${image%%/*}
  if [[ $image != */* || ! ( $host == *.* || $host == *:* || $host == localhost ) ]]; then
    name=${image%%@*}
    [[ ${name##*/} == *:* ]] && name=${name%:*}
    refuse "the image $name has no registry ($image)" "every image names the registry it was pushed to" \
      "add to $folder/kustomization.yaml: images: [{name: $name, newName: REGISTRY/$name}]"
  fi
done < <(sed -nE 's/^[[:space:]]*(- )?image:[[:space:]]*(.*)$/\2/p' <<<"$rendered")

# The settings: the ConfigMap's data as kustomize prints it (each key on its own line, two spaces in, under data:)
settings=$(awk '
  /^---$/ { if (kind == "ConfigMap" && name == "mamba-tune-settings") printf "%s", data; kind = name = data = ""; section = "" ; next }
  /^[a-z]/ { section = $1 }
  /^kind: / { kind = $2 }
  section == "metadata:" && /^  name: / { name = $2 }
  section == "data:" && /^  [A-Za-z_][A-Za-z0-9_]*: / { data = data substr($0, 3) "\n" }
  END { if (kind == "ConfigMap" && name == "mamba-tune-settings") printf "%s", data }
' <<<"$rendered")
for key in "${REQUIRED_SETTINGS[@]}"; do
  value=$(sed -nE "s/^$key:[[:space:]]*(.*)$/\1/p" <<<"$settings")
  value=${value#[\"\']}
  value=${value%[\"\']}
  if [[ -z $value ]]; then
    refuse "the setting $key is not set" "the ConfigMap mamba-tune-settings holds the site's $key" \
      "add $key=VALUE to the literals of its configMapGenerator in $folder/kustomization.yaml"
  fi
  if [[ $value =~ ://[^/@]*:[^/@]*@ ]]; then
    refuse "the setting $key holds a password" \
      "a ConfigMap holds no credentials (whoever may read the namespace reads them)" \
      "remove it from $key; the database's password comes from the tracking server's secret"
  fi
done
echo "overlay $overlay: ready; kubectl apply -k $folder"
