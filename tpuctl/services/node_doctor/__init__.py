"""`tpuctl doctor NODE`: the troubleshooting chain on a live node (`live.py` gathers the
node as the API describes it and each worker's `checkup` over SSH; `checks.py` holds the
verdicts, pure functions of those inputs). The static checks of a script are
`services/doctor/`'s."""
