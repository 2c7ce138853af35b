"""One study's bookkeeping: ledger, lock, reconcile, and the runs that use them."""
