"""The ConSens paper's Table 1 example with the default model: python -m papers.consens.table1_example"""

import ragsense

QUESTION = "What is David Baker known for?"
ANSWER = "David Baker is a biochemist and computational biologist."
CONTEXTS = [
    "David Baker is an American scientist who has pioneered methods to design proteins and predict their "
    "three-dimensional structures.",
    "Colorless green ideas sleep furiously.",
    "David Baker is an English professional footballer.",
]

for context in CONTEXTS:
    scores = ragsense.grounding(QUESTION, [context], ANSWER).consens_by_aggregation
    print({name: round(value, 2) for name, value in scores.items()})
