"""The gold stage and what is made of it: the gold tables (`stage.run_gold`), the decision per topic
(`decision`) and the HTML report (`report`)."""
