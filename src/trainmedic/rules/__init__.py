"""Rules: one file per finding, decided and worded in that file alone.

`rules/<group>/<code>_<slug>.py` holds a finding's catalogue entry (`SPEC`, with its
documentation and an executable example), its decision (`RULES` over a `RunRecord`, or
`judge(evidence)` for a collector that measured something) with its thresholds, and its
wording (`message`, and `fix` where the fix depends on what was measured). Its `SPEC` also
says where it is decided (`decided_in`); the registry finds the files by their names and
derives from those declarations what each guard, check and command applies.
`rules/_helpers/` holds what several findings share. No rule does I/O or
imports a framework.
"""
