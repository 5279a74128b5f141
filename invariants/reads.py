"""The spec functions a view variable's source may call (invariants/view.py).

A variable whose value spec computes (the HW a consumer can read, the ISR a leader's HW is
computed over) reads spec's own function, so the view computes nothing spec computes. The
compiled checks (invariants/source.py, also on Spark executors, without Z3) and the oracle
(oracle/, through View.values_fn) run the sources in this namespace. It imports only spec/.
"""

from __future__ import annotations

from kafkamc.spec.hw import exposed_hw, isr_in_use

SPEC_FUNCTIONS = {"exposed_hw": exposed_hw, "isr_in_use": isr_in_use}
