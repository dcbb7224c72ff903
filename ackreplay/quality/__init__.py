"""Data quality: Great Expectations suites per table (catalog.py, frames.py), reconciliation counts
(reconcile.py), the verdict and `dq_results` (runner.py). Kept import-light: config.py reads catalog.py."""
