"""Rebuild the quality bench's data from the public datasets in ../shared/datasets.

    .venv/bin/python bench/data/build.py [--source ../shared/datasets]

Writes, beside this file:
- realmem.json.gz: per user, the sessions in the dataset's own order, each with its
  memory facts (`extracted_memory` contents) and the questions asked in it, each
  question with its evidence sessions (the next assistant turn's `memory_session_uuids`).
- madial_zh.json.gz, madial_en.json.gz: the event memories with their user, the 160
  queries (the dialogue before the first test turn) with their relevant memory ids, and
  the published models' top-20 lists (`anchors/`), aligned with the queries.

Only what the bench reads is kept; bench/data/NOTICE says what was changed. The output
is deterministic (sorted keys, a fixed gzip mtime), so a rebuild from the same source
gives the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parent.parent.parent / "shared" / "datasets"

# File name in madial/anchors/<lang>/ -> the name the bench reports.
ANCHORS = {
    "en": {
        "openai_top_20_bottom.json": "openai",
        "bge_m3_top_20.json": "bge_m3",
        "gte_top_20.json": "gte",
        "jina_top_20.json": "jina",
    },
    "zh": {
        "openai_zh_top_20_ids.json": "openai",
        "BGE_M3_dense_zh_top_20_ids.json": "bge_m3_dense",
        "BGE_M3_colbert_zh_top_20_ids.json": "bge_m3_colbert",
        "Stella_zh_top_20_ids.json": "stella",
        "Dmeta_zh_top_20_ids.json": "dmeta",
        "Acge_zh_top_20_ids.json": "acge",
    },
}


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def fact_text(content: Any) -> str:
    # One fact in the whole dataset is a JSON object (a trip itinerary): keep it as JSON.
    if isinstance(content, str):
        return content.strip()
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def realmem(source: Path) -> dict[str, Any]:
    users = []
    for path in sorted((source / "realmem").glob("*_dialogues_256k.json")):
        raw = json.loads(path.read_text(encoding="utf-8"))
        sessions = []
        for session in raw["dialogues"]:
            turns = session["dialogue_turns"]
            questions = []
            for i, turn in enumerate(turns):
                if not turn.get("is_query"):
                    continue
                answer = turns[i + 1] if i + 1 < len(turns) else {}
                questions.append(
                    {
                        "id": turn["query_id"],
                        "text": turn["content"].strip(),
                        "type": turn.get("category_name"),
                        "evidence": answer.get("memory_session_uuids") or [],
                    }
                )
            memories = [fact_text(m["content"]) for m in session["extracted_memory"]]
            memories = [m for m in memories if m]
            if not memories and not questions:
                continue
            sessions.append(
                {
                    "id": session["session_uuid"],
                    "time": session["current_time"][:10],
                    "filler": session["session_identifier"].startswith("Enhanced:"),
                    "memories": memories,
                    "questions": questions,
                }
            )
        users.append({"name": raw["_metadata"]["person_name"], "sessions": sessions})
    return {
        "source": "RealMemBench 67afd08 dataset/*_dialogues_256k.json (Apache-2.0)",
        "users": users,
    }


def madial(source: Path, lang: str) -> dict[str, Any]:
    folder = source / "madial"
    # The English memory file has no user ids; the Chinese one has them for the same ids.
    owners = {}
    for row in json_lines(folder / "zh" / "MADial-Bench-zh-memory.json"):
        ((key, value),) = row.items()
        owners[int(key)] = int(value["user-id"])
    memories = []
    for row in json_lines(folder / lang / f"MADial-Bench-{lang}-memory.json"):
        ((key, value),) = row.items()
        memories.append(
            {
                "id": int(key),
                "user": owners[int(key)],
                "time": value["time"],
                "text": value["event"].strip(),
            }
        )
    questions = []
    for row in json_lines(folder / lang / f"MADial-Bench-{lang}-dialogue.json"):
        before = row["dialogue"][: min(row["test-turn"])]
        lines = [re.sub(r"\s+", " ", line).strip() for line in before]
        lines = [line for line in lines if line and line != "<BOD>"]
        questions.append(
            {"user": int(row["user-id"]), "query": "\n".join(lines), "relevant": row["relevant-id"]}
        )
    anchors = {}
    for filename, name in ANCHORS[lang].items():
        rows = json_lines(folder / "anchors" / lang / filename)
        assert len(rows) == len(questions), filename
        lists = []
        for row, question in zip(rows, questions, strict=True):
            relevant = row.get("relevant-id", row.get("relevant_id"))
            assert relevant == question["relevant"] and row["user-id"] == question["user"]
            lists.append(row.get("top-20-ids", row.get("top_20_ids")))
        anchors[name] = lists
    return {
        "source": f"MADial-Bench 572e3a1 {lang}/ and anchors/{lang}/ (MIT)",
        "memories": memories,
        "questions": questions,
        "anchors": anchors,
    }


def write(name: str, data: dict[str, Any]) -> None:
    raw = json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    path = HERE / f"{name}.json.gz"
    with path.open("wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.encode("utf-8"))
    print(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    args = parser.parse_args()
    write("realmem", realmem(args.source))
    for lang in ("zh", "en"):
        write(f"madial_{lang}", madial(args.source, lang))


if __name__ == "__main__":
    main()
