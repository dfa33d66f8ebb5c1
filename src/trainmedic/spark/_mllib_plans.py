"""Which DataFrame is which: the semantic hashes of a DataFrame's logical plan.

MLlib leaks are relations between DataFrames: a scaler fitted on the DataFrame that is
split afterwards, an evaluator scoring predictions made from the DataFrame the model was
fitted on. Python object identity cannot see them: every `transform`, `withColumn` or
`randomSplit` makes a new DataFrame object (and a new JVM Dataset). The analyzed logical
plan can: a DataFrame derived from another contains that DataFrame's plan as a subtree,
and Spark's `semanticHash` of a plan node is stable under the renaming of attributes
(`LogicalPlan.canonicalized`). A plan of an ML pipeline has tens of nodes: walking it
costs a few py4j calls per node, milliseconds next to the fit that asked for it, and no
Spark job runs.

Spark Connect DataFrames keep their plan on the server and are not described (None):
the MLlib guards then stay silent.
"""

from __future__ import annotations

from typing import Any

from trainmedic.evidence.mllib import Plan

# A plan larger than this (a loop that unions thousands of DataFrames) is described by its
# first nodes from the top: the relations the guards look for sit near the top of ML plans.
MAX_NODES = 2000


def plan_of(dataframe: Any) -> Plan | None:
    """The plan hashes of a classic (py4j) DataFrame; None for anything else."""
    java = getattr(dataframe, "_jdf", None)
    if java is None:
        return None
    root = java.queryExecution().analyzed()
    nodes: set[int] = set()
    stack = [root]
    while stack and len(nodes) < MAX_NODES:
        node = stack.pop()
        nodes.add(int(node.semanticHash()))
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
    return Plan(int(root.semanticHash()), frozenset(nodes))
