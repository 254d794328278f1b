"""The run protocol: one incremental run of a model (`run`), the evaluation of its plan
(`executor`), what it reports (`report`), and who holds a model (`lease`)."""
