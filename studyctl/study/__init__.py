"""One study's bookkeeping: ledger, lock, reconcile, and the operations submit, resubmit, status, cancel."""
