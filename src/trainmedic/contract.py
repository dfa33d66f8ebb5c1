"""The train/inference input contract: `capture` at training, `check` at inference (DAT013).

    from trainmedic import contract
    contract.capture(x_train).save("model/contract.json")
    contract.check(contract.load("model/contract.json"), batch)

The implementation lives in `trainmedic.data._contract`; this module is its public name.
"""

from __future__ import annotations

from trainmedic.data._contract import Contract, ContractViolation, capture, check, load

__all__ = ["Contract", "ContractViolation", "capture", "check", "load"]
