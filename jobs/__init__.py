"""spark-submit entry points: `spark-submit jobs/<stage>.py --conf conf/<env>.yaml ...`."""
