"""Pure tensor maths of ROLL: chunk returns, importance ratios, mismatch masks and the losses.

No I/O here. `roll.algo.config` holds the loss configs (pydantic, importable without torch);
`roll.algo.losses.build_loss` turns one into a `Loss` the trainer backend calls.
"""
