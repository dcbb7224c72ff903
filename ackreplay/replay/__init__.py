"""Replay of recorded produces under alternative ack policies: the stage (`stage`), its groups (`groups`), the
NumPy kernel (`kernel`), the self-check (`self_check`) and the ISR re-simulation check (`isr_check`)."""
