#!/usr/bin/env python3
"""Writes an OSV all.zip of malicious-package records shaped as the
ossf/malicious-packages set is (one JSON per record, `MAL-YYYY-N` ids,
`affected` naming an npm package, a version list or every version), at
the scale of npm's real set: `osv_records.py OUT.zip [COUNT]`."""
import json
import random
import sys
import zipfile

out = sys.argv[1]
count = int(sys.argv[2]) if len(sys.argv) > 2 else 210_000
random.seed(53)
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
    for n in range(count):
        name = f"mal-pkg-{n * 2}"
        affected = {"package": {"ecosystem": "npm", "name": name}}
        if n % 3 == 0:
            affected["versions"] = [f"1.0.{k}" for k in range(random.randint(1, 4))]
        else:
            affected["ranges"] = [{"type": "SEMVER", "events": [{"introduced": "0"}]}]
        affected["database_specific"] = {"cwes": [{"cweId": "CWE-506", "name": "Embedded Malicious Code"}]}
        record = {
            "modified": "2025-11-24T10:00:00Z",
            "published": "2025-11-24T09:00:00Z",
            "schema_version": "1.5.0",
            "id": f"MAL-2025-{n + 1}",
            "summary": f"Malicious code in {name} (npm)",
            "details": "\n---\n_-= Per source details. Do not edit below this line.=-_\n\n## Source: ossf-package-analysis\n"
            "The package was found to contain malicious code that exfiltrates credentials.\n",
            "affected": [affected],
            "references": [{"type": "WEB", "url": f"https://example.invalid/advisories/{n}"}],
            "credits": [{"name": "OpenSSF: Package Analysis", "type": "FINDER"}],
            "database_specific": {"malicious-packages-origins": [{"source": "ossf-package-analysis", "sha256": "0" * 64}]},
        }
        archive.writestr(f"MAL-2025-{n + 1}.json", json.dumps(record, indent=2))
print(f"{count} records in {out}")
