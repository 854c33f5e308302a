"""The probe fitting engines: batched torch logistic fits, permuted refits, the MLP probe, sklearn."""
